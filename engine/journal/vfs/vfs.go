// Package vfs is the file system under the journal (package
// engine/journal): the few calls it makes of the operating system, behind
// an interface, so that a test or a fault harness can stand between the
// journal and the disk (fail a sync, run out of space, record what was made
// durable) without a global to swap. Default is the operating system's.
//
// The interface is the journal's, not a general one: files are created
// write-only and truncated, opened read-write or read-only, and synced with
// the cheapest call that makes written data durable (Datasync); holes are
// punched and found where the system can.
package vfs

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// FS is a file system. Names are paths of the operating system's form.
type FS interface {
	// Create creates name, or truncates it, for writing (mode 0600).
	Create(name string) (File, error)
	// OpenReadWrite opens an existing name for reading and writing.
	OpenReadWrite(name string) (File, error)
	// Open opens name for reading.
	Open(name string) (File, error)
	// Remove removes a file or an empty directory; RemoveAll a tree.
	Remove(name string) error
	RemoveAll(name string) error
	// Rename renames oldname to newname, replacing it.
	Rename(oldname, newname string) error
	// MkdirAll makes dir and its parents (mode 0700).
	MkdirAll(dir string) error
	// ReadDir lists dir, sorted by name.
	ReadDir(dir string) ([]os.DirEntry, error)
	// SyncDir makes the names in dir durable: creations, renames, removals.
	SyncDir(dir string) error
	// FreeSpace returns the bytes free to an unprivileged user on the file
	// system of dir (errors.ErrUnsupported where the system cannot say).
	FreeSpace(dir string) (int64, error)
	// Lock takes an exclusive lock on the file name, made if absent, and
	// holds it until the Closer is closed; ErrLocked if another process
	// holds it.
	Lock(name string) (io.Closer, error)
}

// File is an open file of an FS.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Seeker
	io.Closer
	// Name is the name the file was opened by.
	Name() string
	Stat() (os.FileInfo, error)
	Truncate(size int64) error
	// Sync makes the file's data and metadata durable (fsync).
	Sync() error
	// Datasync makes what was written durable with the cheapest call that
	// does: fdatasync on Linux, F_FULLFSYNC on macOS, else fsync.
	Datasync() error
	// Punch deallocates n bytes from off, which then read as zeros, without
	// needing free space (errors.ErrUnsupported where the system cannot).
	Punch(off, n int64) error
	// NextData returns the offset of the first byte of data (not a hole)
	// at or after off, -1 if there is none, or off itself where the system
	// cannot tell.
	NextData(off int64) (int64, error)
}

// ErrLocked is Lock's error when another process holds the lock.
const ErrLocked = syscall.EWOULDBLOCK

// Default is the operating system's file system.
var Default FS = osFS{}

type osFS struct{}

func (osFS) Create(name string) (File, error) {
	return wrap(os.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600))
}

func (osFS) OpenReadWrite(name string) (File, error) { return wrap(os.OpenFile(name, os.O_RDWR, 0)) }
func (osFS) Open(name string) (File, error)          { return wrap(os.Open(name)) }
func (osFS) Remove(name string) error                { return os.Remove(name) }
func (osFS) RemoveAll(name string) error             { return os.RemoveAll(name) }
func (osFS) Rename(oldname, newname string) error    { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string) error               { return os.MkdirAll(dir, 0o700) }
func (osFS) ReadDir(dir string) ([]os.DirEntry, error) {
	return os.ReadDir(dir)
}
func (osFS) FreeSpace(dir string) (int64, error) { return freeSpace(dir) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

func (osFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// osFile is an *os.File with the calls os does not have.
type osFile struct{ *os.File }

func wrap(f *os.File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (f osFile) Datasync() error                   { return datasync(f.File) }
func (f osFile) Punch(off, n int64) error          { return punch(f.File, off, n) }
func (f osFile) NextData(off int64) (int64, error) { return nextData(f.File, off) }
