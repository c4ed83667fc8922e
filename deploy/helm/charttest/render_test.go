package charttest

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/yaml"
)

// The chart, and the release the tests render it as.
const (
	chartDir  = "../fence"
	release   = "fence"
	namespace = "locks"
)

var loadChart = sync.OnceValues(func() (*chart.Chart, error) { return loader.Load(chartDir) })

// object is one Kubernetes object of a rendering.
type object struct {
	file string         // the template it came from
	yaml []byte         // as rendered
	m    map[string]any // as JSON decodes it
}

func (o object) kind() string       { s, _ := o.m["kind"].(string); return s }
func (o object) apiVersion() string { s, _ := o.m["apiVersion"].(string); return s }
func (o object) name() string {
	md, _ := o.m["metadata"].(map[string]any)
	s, _ := md["name"].(string)
	return s
}
func (o object) String() string {
	return fmt.Sprintf("%s %s/%s (%s)", o.apiVersion(), o.kind(), o.name(), o.file)
}

// rendering is what the chart renders for a set of values.
type rendering struct {
	objects []object
	notes   string
}

// values reads the chart's value files under ci/ named in files, then
// merges each YAML text of overrides over them, as helm install -f FILE
// --values OVERRIDE does.
func values(t *testing.T, files []string, overrides ...string) map[string]any {
	t.Helper()
	vals := map[string]any{}
	for _, f := range files {
		v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, "ci", f))
		if err != nil {
			t.Fatal(err)
		}
		vals = merge(vals, v)
	}
	for _, o := range overrides {
		v, err := chartutil.ReadValues([]byte(o))
		if err != nil {
			t.Fatalf("override %q: %v", o, err)
		}
		vals = merge(vals, v)
	}
	return vals
}

// merge returns dst with src's values set over it, tables merged key by key.
func merge(dst, src map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range dst {
		out[k] = v
	}
	for k, v := range src {
		if sv, ok := v.(map[string]any); ok {
			if dv, ok := out[k].(map[string]any); ok {
				out[k] = merge(dv, sv)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// renderChart renders the chart with vals as helm template does: the values
// checked against values.schema.json, then every template.
func renderChart(vals map[string]any) (rendering, error) {
	ch, err := loadChart()
	if err != nil {
		return rendering{}, err
	}
	opts := chartutil.ReleaseOptions{Name: release, Namespace: namespace, Revision: 1, IsInstall: true}
	top, err := chartutil.ToRenderValues(ch, vals, opts, chartutil.DefaultCapabilities.Copy())
	if err != nil {
		return rendering{}, err
	}
	files, err := engine.Render(ch, top)
	if err != nil {
		return rendering{}, err
	}
	var r rendering
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		text := files[name]
		switch {
		case strings.HasSuffix(name, "NOTES.txt"):
			r.notes = text
			continue
		case !strings.HasSuffix(name, ".yaml"):
			continue
		}
		docs := releaseutil.SplitManifests(text)
		keys := make([]string, 0, len(docs))
		for k := range docs {
			keys = append(keys, k)
		}
		sort.Sort(releaseutil.BySplitManifestsOrder(keys))
		for _, k := range keys {
			doc := docs[k]
			var m map[string]any
			if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
				return rendering{}, fmt.Errorf("%s: %v\n%s", name, err, doc)
			}
			if m == nil {
				continue // only comments
			}
			r.objects = append(r.objects, object{file: name, yaml: []byte(doc), m: m})
		}
	}
	return r, nil
}

// render renders the chart with vals, fails the test if it does not render,
// and validates every object against the Kubernetes schemas.
func render(t *testing.T, vals map[string]any) rendering {
	t.Helper()
	r, err := renderChart(vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	if len(r.objects) == 0 {
		t.Fatal("render: no objects")
	}
	v := schemas(t)
	for _, o := range r.objects {
		if err := v.validate(o); err != nil {
			t.Errorf("%v: %v\n%s", o, err, o.yaml)
		}
	}
	return r
}

// kinds returns "Kind/name" of every object, sorted.
func (r rendering) kinds() []string {
	var ks []string
	for _, o := range r.objects {
		ks = append(ks, o.kind()+"/"+o.name())
	}
	slices.Sort(ks)
	return ks
}

// get decodes the one object of kind and name into out (a k8s.io/api type),
// strictly; it fails the test if there is none.
func (r rendering) get(t *testing.T, kind, name string, out any) {
	t.Helper()
	for _, o := range r.objects {
		if o.kind() == kind && o.name() == name {
			if err := yaml.UnmarshalStrict(o.yaml, out); err != nil {
				t.Fatalf("%v: %v", o, err)
			}
			return
		}
	}
	t.Fatalf("no %s %s in %v", kind, name, r.kinds())
}

func (r rendering) has(kind, name string) bool {
	return slices.Contains(r.kinds(), kind+"/"+name)
}
