package prepare

// FailCheckpointWrites makes every checkpoint write whose content fail
// says so fail, until the test ends.
func FailCheckpointWrites(cleanup func(func()), fail func(data []byte) bool, err error) {
	write := writeFile
	writeFile = func(path string, data []byte) error {
		if fail(data) {
			return err
		}
		return write(path, data)
	}
	cleanup(func() { writeFile = write })
}
