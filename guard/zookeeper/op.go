package zookeeper

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/fence-lock/fence"
	"github.com/go-zookeeper/zk"
)

// Op is one operation of a guarded write, as zk.Conn.Multi takes them: a
// *zk.CreateRequest, *zk.SetDataRequest, *zk.DeleteRequest or
// *zk.CheckVersionRequest. Create, Set, Delete and Check make the common
// ones; build the zk request yourself for another version, ACL or flags.
type Op any

// Create returns an op that creates the persistent znode path with data
// and the open ACL zk.WorldACL(zk.PermAll). It fails the whole write with
// zk.ErrNodeExists if path exists, and with zk.ErrNoNode if its parent does
// not.
func Create(path string, data []byte) Op {
	return &zk.CreateRequest{Path: path, Data: data, Acl: zk.WorldACL(zk.PermAll)}
}

// Set returns an op that sets the data of the znode path, whatever its
// version. It fails the whole write with zk.ErrNoNode if path does not
// exist.
func Set(path string, data []byte) Op {
	return &zk.SetDataRequest{Path: path, Data: data, Version: -1}
}

// Delete returns an op that deletes the znode path, whatever its version.
// It fails the whole write with zk.ErrNoNode if path does not exist, and
// with zk.ErrNotEmpty if it has children.
func Delete(path string) Op {
	return &zk.DeleteRequest{Path: path, Version: -1}
}

// Check returns an op that writes nothing and fails the whole write with
// zk.ErrBadVersion unless the znode path has data version version (with
// zk.ErrNoNode if it does not exist).
func Check(path string, version int32) Op {
	return &zk.CheckVersionRequest{Path: path, Version: version}
}

// opPath returns op's path and a name for errors, or an error wrapping
// fence.ErrBadRequest for a value that is not one of the four requests.
func opPath(op Op) (path, kind string, sequential bool, err error) {
	switch r := op.(type) {
	case *zk.CreateRequest:
		if r != nil {
			return r.Path, "create", r.Flags&zk.FlagSequence != 0, nil
		}
	case *zk.SetDataRequest:
		if r != nil {
			return r.Path, "set", false, nil
		}
	case *zk.DeleteRequest:
		if r != nil {
			return r.Path, "delete", false, nil
		}
	case *zk.CheckVersionRequest:
		if r != nil {
			return r.Path, "check", false, nil
		}
	default:
		return "", "", false, fmt.Errorf("%w: %T is not a *zk.CreateRequest, *zk.SetDataRequest, *zk.DeleteRequest or *zk.CheckVersionRequest", fence.ErrBadRequest, op)
	}
	return "", "", false, fmt.Errorf("%w: a nil %T", fence.ErrBadRequest, op)
}

// checkOps returns an error wrapping fence.ErrBadRequest unless every op is
// one of the four requests, on a valid path that is neither root nor under
// it: a write there could lower a fence.
func checkOps(root string, ops []Op) error {
	for i, op := range ops {
		path, kind, seq, err := opPath(op)
		if err != nil {
			return fmt.Errorf("op %d: %w", i, err)
		}
		if err := validatePath(path, seq); err != nil {
			return fmt.Errorf("op %d (%s): %w", i, kind, err)
		}
		if path == root || strings.HasPrefix(path, root+"/") {
			return fmt.Errorf("%w: op %d (%s %s) is at or under the fence root %q", fence.ErrBadRequest, i, kind, path, root)
		}
	}
	return nil
}

// validatePath returns an error wrapping fence.ErrBadRequest unless path is a
// path ZooKeeper accepts (its PathUtils.validatePath): absolute, no empty,
// "." or ".." segment, no trailing '/' (but for "/", or a sequential create,
// whose suffix the server appends), valid UTF-8 with none of the characters
// ZooKeeper refuses.
func validatePath(path string, sequential bool) error {
	bad := func(why string) error { return fmt.Errorf("%w: znode path %q %s", fence.ErrBadRequest, path, why) }
	switch {
	case path == "":
		return bad("is empty")
	case path[0] != '/':
		return bad("is not absolute")
	case path == "/":
		return nil
	case !utf8.ValidString(path):
		return bad("is not valid UTF-8")
	}
	p := path
	if sequential {
		p = path + "1" // what the server validates: the path with a suffix
	}
	if strings.HasSuffix(p, "/") {
		return bad("ends with '/'")
	}
	for seg := range strings.SplitSeq(p[1:], "/") {
		switch seg {
		case "":
			return bad("has an empty segment")
		case ".", "..":
			return bad(`has a "." or ".." segment`)
		}
	}
	for _, r := range p {
		if r == 0 || r < 0x20 || (0x7f <= r && r <= 0x9f) || (0xd800 <= r && r <= 0xf8ff) || (0xfff0 <= r && r <= 0xffff) {
			return bad(fmt.Sprintf("has the character %U, which ZooKeeper refuses", r))
		}
	}
	return nil
}
