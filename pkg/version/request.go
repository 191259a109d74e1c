package version

import (
	"fmt"
	"io"
	"strconv"
)

// Request is what a binary's --version asks for: nothing (""), the
// version line ("true") or the line and the build information ("raw",
// for the module versions and settings such as CGO_ENABLED that decide
// how the node agent reaches NVML).
type Request string

// Request's values besides "".
const (
	RequestLine Request = "true"
	RequestRaw  Request = "raw"
)

// ParseRequest reads --version's value: a boolean or "raw".
func ParseRequest(v string) (Request, error) {
	if v == string(RequestRaw) {
		return RequestRaw, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return "", fmt.Errorf("%q: want true, false or raw", v)
	}
	if b {
		return RequestLine, nil
	}
	return "", nil
}

// Set implements flag.Value.
func (r *Request) Set(v string) error {
	parsed, err := ParseRequest(v)
	if err != nil {
		return err
	}
	*r = parsed
	return nil
}

// String implements flag.Value.
func (r *Request) String() string {
	if r == nil || *r == "" {
		return "false"
	}
	return string(*r)
}

// IsBoolFlag lets --version stand alone, as a boolean flag.
func (r *Request) IsBoolFlag() bool { return true }

// Print writes what r asks for about program to w and reports whether it
// wrote anything.
func (r Request) Print(w io.Writer, program string) (bool, error) {
	var err error
	switch r {
	case RequestLine:
		_, err = fmt.Fprintln(w, Line(program))
	case RequestRaw:
		_, err = fmt.Fprint(w, Raw(program))
	default:
		return false, nil
	}
	return true, err
}
