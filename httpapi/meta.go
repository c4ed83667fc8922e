package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"

	"github.com/fence-lock/fence"
	"github.com/fence-lock/fence/docs"
	"github.com/fence-lock/fence/ui"
	"github.com/fence-lock/fence/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metaHandlers binds what every server answers itself: health, readiness,
// metrics, the OpenAPI document, the cluster, the public keys and the
// dashboard's files.
var metaHandlers = handlerSet{
	wire.OpGetHealth:        {serve: (*Handler).health},
	wire.OpGetReady:         {serve: (*Handler).ready},
	wire.OpGetMetrics:       {serve: (*Handler).serveMetrics},
	wire.OpGetOpenAPI:       {serve: (*Handler).openAPI},
	wire.OpGetCluster:       {serve: (*Handler).cluster},
	wire.OpGetKeys:          {serve: (*Handler).keys},
	wire.OpGetDashboardFile: {serve: (*Handler).ui},
}

// health answers GET /healthz.
func (s *Handler) health(c *call) error {
	c.writeJSON(wire.Health{Status: "ok"})
	return nil
}

func (s *Handler) ready(c *call) error {
	if s.Ready != nil {
		if err := s.Ready(); err != nil {
			return fmt.Errorf("%w: %v", wire.ErrNotReady, err) // not_ready, whatever the cause
		}
	}
	c.writeJSON(wire.Health{Status: "ok"})
	return nil
}

func (s *Handler) cluster(c *call) error {
	st := wire.ClusterStatus{Role: wire.RoleLeader, Epoch: 1, Store: "embedded", Servers: []wire.ClusterServer{{Role: wire.RoleLeader}}}
	if s.Cluster != nil {
		var err error
		if st, err = s.Cluster(c.r.Context()); err != nil {
			return err
		}
	}
	if st.Servers == nil {
		st.Servers = []wire.ClusterServer{}
	}
	c.writeJSON(st)
	return nil
}

func (s *Handler) keys(c *call) error {
	keys := s.Keys
	if keys == nil {
		keys = []fence.PublicKey{}
	}
	b, err := json.Marshal(wire.KeysResponse{Keys: keys})
	if err != nil { // a key of the wrong size or with a bad id
		return fmt.Errorf("%w: encoding the public keys: %w", wire.ErrInternal, err)
	}
	c.writeRaw(b)
	return nil
}

// openAPI answers GET /v1/openapi.json: the API's OpenAPI 3.1 document.
func (s *Handler) openAPI(c *call) error {
	c.writeRaw(bytes.TrimSpace(docs.OpenAPIJSON))
	return nil
}

// ui answers GET /ui/{file}: the dashboard's files, index.html for /ui and
// /ui/.
func (s *Handler) ui(c *call) error {
	name, err := unescape("file", c.rawKey)
	if err != nil {
		return err
	}
	if name == "" {
		name = "index.html"
	}
	if !fs.ValidPath(name) {
		return fmt.Errorf("%w: no dashboard file %q", fence.ErrNotFound, name)
	}
	b, err := fs.ReadFile(ui.Files(), name)
	if err != nil {
		return fmt.Errorf("%w: no dashboard file %q", fence.ErrNotFound, name)
	}
	h := c.w.Header()
	h.Set("Content-Type", ui.ContentType(name))
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	c.w.WriteHeader(http.StatusOK)
	if c.r.Method != "HEAD" {
		c.w.Write(b)
	}
	return nil
}

// serveMetrics answers GET /metrics.
func (s *Handler) serveMetrics(c *call) error {
	g := s.Gatherer
	if g == nil {
		g = prometheus.DefaultGatherer
	}
	promhttp.HandlerFor(g, promhttp.HandlerOpts{}).ServeHTTP(c.w, c.r)
	return nil
}
