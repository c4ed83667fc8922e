package vfs

import (
	"io"
	"os"
)

// Op names a call of an FS or a File, as a Fault sees it.
type Op string

// The calls a Fault sees: every call of an FS or a File that changes what
// is on disk or makes it durable. Reads are not among them: the faults a
// journal must survive are those of writing and syncing.
const (
	OpMkdir     Op = "mkdir"
	OpLock      Op = "lock"
	OpCreate    Op = "create"
	OpRemove    Op = "remove"
	OpRename    Op = "rename"
	OpSyncDir   Op = "syncdir"
	OpWrite     Op = "write"
	OpTruncate  Op = "truncate"
	OpSync      Op = "sync"
	OpDatasync  Op = "datasync"
	OpPunch     Op = "punch"
	OpFreeSpace Op = "freespace"
)

// Fault decides a call: nil lets it run, an error fails it with that error
// before it does anything. name is the file's or directory's; of a rename,
// the new name.
type Fault func(op Op, name string) error

// WithFaults returns fs with fault standing before each of the calls that
// change what is on disk or make it durable, of fs and of the files it
// opens.
func WithFaults(fs FS, fault Fault) FS { return faultFS{fs, fault} }

type faultFS struct {
	FS
	fault Fault
}

func (fs faultFS) Create(name string) (File, error) {
	if err := fs.fault(OpCreate, name); err != nil {
		return nil, err
	}
	return fs.file(fs.FS.Create(name))
}

func (fs faultFS) OpenReadWrite(name string) (File, error) { return fs.file(fs.FS.OpenReadWrite(name)) }
func (fs faultFS) Open(name string) (File, error)          { return fs.file(fs.FS.Open(name)) }

func (fs faultFS) file(f File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return faultFile{f, fs.fault}, nil
}

func (fs faultFS) Remove(name string) error {
	if err := fs.fault(OpRemove, name); err != nil {
		return err
	}
	return fs.FS.Remove(name)
}

func (fs faultFS) RemoveAll(name string) error {
	if err := fs.fault(OpRemove, name); err != nil {
		return err
	}
	return fs.FS.RemoveAll(name)
}

func (fs faultFS) Rename(oldname, newname string) error {
	if err := fs.fault(OpRename, newname); err != nil {
		return err
	}
	return fs.FS.Rename(oldname, newname)
}

func (fs faultFS) SyncDir(dir string) error {
	if err := fs.fault(OpSyncDir, dir); err != nil {
		return err
	}
	return fs.FS.SyncDir(dir)
}

func (fs faultFS) FreeSpace(dir string) (int64, error) {
	if err := fs.fault(OpFreeSpace, dir); err != nil {
		return 0, err
	}
	return fs.FS.FreeSpace(dir)
}

func (fs faultFS) MkdirAll(dir string) error {
	if err := fs.fault(OpMkdir, dir); err != nil {
		return err
	}
	return fs.FS.MkdirAll(dir)
}

func (fs faultFS) Lock(name string) (io.Closer, error) {
	if err := fs.fault(OpLock, name); err != nil {
		return nil, err
	}
	return fs.FS.Lock(name)
}

func (fs faultFS) ReadDir(dir string) ([]os.DirEntry, error) { return fs.FS.ReadDir(dir) }

type faultFile struct {
	File
	fault Fault
}

func (f faultFile) Write(b []byte) (int, error) {
	if err := f.fault(OpWrite, f.Name()); err != nil {
		return 0, err
	}
	return f.File.Write(b)
}

func (f faultFile) WriteAt(b []byte, off int64) (int, error) {
	if err := f.fault(OpWrite, f.Name()); err != nil {
		return 0, err
	}
	return f.File.WriteAt(b, off)
}

func (f faultFile) Truncate(size int64) error {
	if err := f.fault(OpTruncate, f.Name()); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f faultFile) Sync() error {
	if err := f.fault(OpSync, f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f faultFile) Datasync() error {
	if err := f.fault(OpDatasync, f.Name()); err != nil {
		return err
	}
	return f.File.Datasync()
}

func (f faultFile) Punch(off, n int64) error {
	if err := f.fault(OpPunch, f.Name()); err != nil {
		return err
	}
	return f.File.Punch(off, n)
}
