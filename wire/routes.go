package wire

import (
	"net/url"
	"strings"
)

// The API's routes: the one table that the server dispatches and
// authorises from (package httpapi binds a handler to each operation), that
// the Go client builds its requests from, and that docs/openapi.yaml is
// checked against (operationId, method, path, permission, x-fence-local and
// rate limits). A new operation is a row here, a handler, a client method
// and its rule in package state.

// Perm is a permission that a caller's grants give on resources.
type Perm string

// The permissions of the API (see API.md, Authentication).
const (
	PermLock  Perm = "lock"
	PermRead  Perm = "read"
	PermWrite Perm = "write"
	PermAdmin Perm = "admin"
)

// Access says how the server authorises an operation's requests.
type Access int

const (
	// OnResource: a caller with the operation's Perm on the path's resource.
	OnResource Access = iota
	// AnyCaller: any authenticated caller; the handler checks or filters
	// per resource with the operation's Perm (a listing, a watch, a txn).
	AnyCaller
	// Open: no credentials needed.
	Open
	// AdminIfProtected: Perm on every resource when the server protects
	// its metrics, else open.
	AdminIfProtected
)

// Route is one path of the API and what every method of it shares.
type Route struct {
	// Pattern is the path as the API writes it: "{resource}" is one
	// percent-encoded segment, "{key}" (last) one or more, "{file}" the
	// rest of the path after "/ui/", possibly empty.
	Pattern string
	// Local: every server answers it itself, never forwarding it to the
	// leader (x-fence-local in the OpenAPI document).
	Local bool
	// Exempt: not rate limited (never 429).
	Exempt bool
	// Browser: loaded by browsers, so a 401 also challenges for HTTP Basic.
	Browser bool
	// Ops are the operations of the path, one per method; HEAD where GET is.
	Ops []*Op
}

// Op is one method of one route: one operation of the OpenAPI document.
type Op struct {
	// ID is the operation's operationId in docs/openapi.yaml.
	ID     string
	Method string
	// Route is the path the operation belongs to (set by the table).
	Route *Route
	// Access and Perm say who may send it.
	Access Access
	Perm   Perm
	// Write names the storage write it is (put, delete, claim, txn): its
	// rejections count as storage rejections; "" for the others.
	Write string
}

// Path returns the operation's path with its parameters percent-encoded:
// resource as one segment, key as segments of its own ('/' kept between
// them), as the server matches them.
func (op *Op) Path(resource, key string) string {
	p := op.Route.Pattern
	if strings.Contains(p, "{resource}") {
		p = strings.Replace(p, "{resource}", url.PathEscape(resource), 1)
	}
	if strings.Contains(p, "{key}") {
		segs := strings.Split(key, "/")
		for i, s := range segs {
			segs[i] = url.PathEscape(s)
		}
		p = strings.Replace(p, "{key}", strings.Join(segs, "/"), 1)
	}
	return p
}

func route(pattern string, ops ...*Op) *Route {
	rt := &Route{Pattern: pattern, Ops: ops}
	for _, op := range ops {
		op.Route = rt
	}
	return rt
}

func local(rt *Route) *Route   { rt.Local = true; return rt }
func exempt(rt *Route) *Route  { rt.Exempt = true; return rt }
func browser(rt *Route) *Route { rt.Browser = true; return rt }

func op(id, method string, access Access, perm Perm) *Op {
	return &Op{ID: id, Method: method, Access: access, Perm: perm}
}

func write(o *Op, kind string) *Op { o.Write = kind; return o }

// The operations, by the name the server and the client use.
var (
	OpGetHealth         = op("getHealth", "GET", Open, "")
	OpHeadHealth        = op("headHealth", "HEAD", Open, "")
	OpGetReady          = op("getReady", "GET", Open, "")
	OpHeadReady         = op("headReady", "HEAD", Open, "")
	OpGetMetrics        = op("getMetrics", "GET", AdminIfProtected, PermAdmin)
	OpHeadMetrics       = op("headMetrics", "HEAD", AdminIfProtected, PermAdmin)
	OpGetOpenAPI        = op("getOpenAPI", "GET", Open, "")
	OpHeadOpenAPI       = op("headOpenAPI", "HEAD", Open, "")
	OpGetCluster        = op("getCluster", "GET", AnyCaller, PermRead)
	OpHeadCluster       = op("headCluster", "HEAD", AnyCaller, PermRead)
	OpGetKeys           = op("getKeys", "GET", Open, "")
	OpHeadKeys          = op("headKeys", "HEAD", Open, "")
	OpGetDashboardFile  = op("getDashboardFile", "GET", AnyCaller, PermRead)
	OpHeadDashboardFile = op("headDashboardFile", "HEAD", AnyCaller, PermRead)
	OpWatch             = op("watch", "GET", AnyCaller, PermRead)
	OpListLocks         = op("listLocks", "GET", AnyCaller, PermRead)
	OpHeadLocks         = op("headLocks", "HEAD", AnyCaller, PermRead)
	OpAcquireLocks      = op("acquireLocks", "POST", AnyCaller, PermLock)
	OpGetLock           = op("getLock", "GET", OnResource, PermRead)
	OpHeadLock          = op("headLock", "HEAD", OnResource, PermRead)
	OpAcquireLock       = op("acquireLock", "POST", OnResource, PermLock)
	OpRenewLock         = op("renewLock", "POST", OnResource, PermLock)
	OpReleaseLock       = op("releaseLock", "POST", OnResource, PermLock)
	OpTransferLock      = op("transferLock", "POST", OnResource, PermLock)
	OpRevokeLock        = op("revokeLock", "POST", OnResource, PermAdmin)
	OpGetValue          = op("getValue", "GET", OnResource, PermRead)
	OpHeadValue         = op("headValue", "HEAD", OnResource, PermRead)
	OpPutValue          = write(op("putValue", "PUT", OnResource, PermWrite), "put")
	OpDeleteValue       = write(op("deleteValue", "DELETE", OnResource, PermWrite), "delete")
	OpListFences        = op("listFences", "GET", AnyCaller, PermRead)
	OpHeadFences        = op("headFences", "HEAD", AnyCaller, PermRead)
	OpGetFence          = op("getFence", "GET", OnResource, PermRead)
	OpHeadFence         = op("headFence", "HEAD", OnResource, PermRead)
	OpClaimFence        = write(op("claimFence", "POST", OnResource, PermWrite), "claim")
	// A txn is authorised per resource once its body is decoded: write on
	// every resource of its fences and ops, read on those of its compares.
	OpTxn = write(op("txn", "POST", AnyCaller, PermWrite), "txn")
)

// Routes is the API's route table, in the order of docs/openapi.yaml.
var Routes = []*Route{
	exempt(local(route("/healthz", OpGetHealth, OpHeadHealth))),
	exempt(local(route("/readyz", OpGetReady, OpHeadReady))),
	local(route("/metrics", OpGetMetrics, OpHeadMetrics)),
	local(route("/v1/openapi.json", OpGetOpenAPI, OpHeadOpenAPI)),
	local(route("/v1/cluster", OpGetCluster, OpHeadCluster)),
	local(route("/v1/keys", OpGetKeys, OpHeadKeys)),
	// The dashboard's files: any valid credentials may load them; what
	// they show comes from the API, filtered by the caller's grants.
	browser(local(route("/ui/{file}", OpGetDashboardFile, OpHeadDashboardFile))),
	route("/v1/watch", OpWatch),
	route("/v1/locks", OpListLocks, OpHeadLocks, OpAcquireLocks),
	route("/v1/locks/{resource}", OpGetLock, OpHeadLock),
	route("/v1/locks/{resource}/acquire", OpAcquireLock),
	route("/v1/locks/{resource}/renew", OpRenewLock),
	route("/v1/locks/{resource}/release", OpReleaseLock),
	route("/v1/locks/{resource}/transfer", OpTransferLock),
	route("/v1/locks/{resource}/revoke", OpRevokeLock),
	route("/v1/kv/{resource}/{key}", OpGetValue, OpHeadValue, OpPutValue, OpDeleteValue),
	route("/v1/fences", OpListFences, OpHeadFences),
	route("/v1/fences/{resource}", OpGetFence, OpHeadFence, OpClaimFence),
	route("/v1/txn", OpTxn),
}
