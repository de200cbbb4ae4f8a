package cdr

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
)

// fileMode is the mode of a new CDR file: CDRs carry phone numbers, so the
// file is not world-readable.
const fileMode = 0o640

// fileSink is the CDR file with its write buffer and size-based rotation.
// It is used by the writer goroutine alone (and by New before that starts).
type fileSink struct {
	path       string
	maxSize    int64 // <= 0: never rotate
	maxBackups int
	f          *os.File // nil after an I/O error, until the next open
	bw         *bufio.Writer
	size       int64 // bytes in the file, buffered ones included
}

func newFileSink(path string, maxSize int64, maxBackups int) *fileSink {
	return &fileSink{path: path, maxSize: maxSize, maxBackups: maxBackups, bw: bufio.NewWriterSize(nil, 64<<10)}
}

// open opens (or creates) the file for appending. The sink must be closed.
func (s *fileSink) open() error {
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, fileMode)
	if err != nil {
		return fmt.Errorf("cannot open CDR file %q: %w", s.path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("cannot stat CDR file %q: %w", s.path, err)
	}
	s.f, s.size = f, st.Size()
	s.bw.Reset(f)
	if st.Mode().IsRegular() && st.Size() > 0 && !endsInNewline(s.path, st) {
		// A line cut short (a write error such as a full disk, or a crash
		// mid-write) is ended here, so that it spoils itself only and not
		// the next record too.
		s.bw.WriteByte('\n')
		s.size++
	}
	return nil
}

// endsInNewline reports whether the file at path, which is st, ends in a
// newline. When that cannot be read, it says so (true): adding a newline is
// only a repair.
func endsInNewline(path string, st fs.FileInfo) bool {
	f, err := os.Open(path)
	if err != nil {
		return true
	}
	defer f.Close()
	var last [1]byte
	if rst, err := f.Stat(); err != nil || !os.SameFile(st, rst) {
		return true
	}
	if _, err := f.ReadAt(last[:], st.Size()-1); err != nil {
		return true
	}
	return last[0] == '\n'
}

// needsRotation reports whether writing n more bytes would take the file past
// maxSize. A line longer than maxSize still goes into a file of its own.
func (s *fileSink) needsRotation(n int) bool {
	return s.maxSize > 0 && s.size > 0 && s.size+int64(n) > s.maxSize
}

// write appends line to the buffer; bufio writes to the file when it fills.
func (s *fileSink) write(line []byte) error {
	n, err := s.bw.Write(line)
	s.size += int64(n)
	return err
}

// flush writes the buffered bytes to the file.
func (s *fileSink) flush() error {
	if s.f == nil {
		return nil
	}
	return s.bw.Flush()
}

// close flushes and closes the file. The sink is closed afterwards even on an
// error; the buffer is discarded.
func (s *fileSink) close() error {
	if s.f == nil {
		return nil
	}
	err := s.bw.Flush()
	if cerr := s.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("cannot close CDR file %q: %w", s.path, cerr)
	}
	s.f = nil
	s.bw.Reset(nil)
	return err
}

// rotate moves the closed file to path.1 after shifting path.1 to path.2 and
// so on, deleting path.<maxBackups>. It does not open the new file. A
// missing backup is not an error.
func (s *fileSink) rotate() error {
	var errs []error
	for i := s.maxBackups; i >= 1; i-- {
		from := s.backup(i)
		var err error
		if i == s.maxBackups {
			err = os.Remove(from)
		} else {
			err = os.Rename(from, s.backup(i+1))
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := os.Rename(s.path, s.backup(1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cannot rotate CDR file %q: %w", s.path, err)
	}
	return nil
}

func (s *fileSink) backup(i int) string { return s.path + "." + strconv.Itoa(i) }
