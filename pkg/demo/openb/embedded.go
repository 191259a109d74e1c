package openb

import (
	"compress/gzip"
	"embed"
	"errors"
	"io"
	"io/fs"
)

// data holds the trace's node list and pod lists, gzip-compressed; see
// data/README.md for their source, terms and citation.
//
//go:embed data/*.csv.gz
var data embed.FS

// Embedded is the trace as shipped with gputopo: LoadNodes and LoadPods
// read it like a folder of the original CSV files.
func Embedded() fs.FS {
	sub, err := fs.Sub(data, "data")
	if err != nil {
		panic(err) // the embedded folder exists at build time
	}
	return sub
}

// openFile opens name in fsys, or name.gz there, decompressed: a folder of
// the original files and the embedded copy read alike.
func openFile(fsys fs.FS, name string) (io.ReadCloser, error) {
	f, err := fsys.Open(name)
	if err == nil {
		return f, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	gz, gzErr := fsys.Open(name + ".gz")
	if gzErr != nil {
		return nil, err // name the file that was asked for
	}
	r, err := gzip.NewReader(gz)
	if err != nil {
		_ = gz.Close()
		return nil, err
	}
	return &gzipFile{Reader: r, file: gz}, nil
}

// gzipFile closes the decompressor and the file under it.
type gzipFile struct {
	*gzip.Reader
	file fs.File
}

func (g *gzipFile) Close() error {
	return errors.Join(g.Reader.Close(), g.file.Close())
}
