// Command stamped prints version.Line, for the test that the linker flag
// the Makefile and the Dockerfile pass reaches version.Version.
package main

import (
	"fmt"

	"github.com/gputopo/gputopo/pkg/version"
)

func main() {
	fmt.Println(version.Line("stamped"))
}
