package charttest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// validator checks objects against the Kubernetes OpenAPI schemas and the
// ServiceMonitor's CustomResourceDefinition in testdata (TestUpdateSchemas).
//
// The API server rejects a field that its type lacks (kubectl apply's
// strict field validation), but the published schemas do not say
// additionalProperties: false. So every object schema that lists its
// properties is closed here, and an object of a built-in kind is also
// decoded strictly into its k8s.io/api type.
type validator struct {
	byGVK      map[string]*openapi3.Schema // "apps/v1 StatefulSet"
	objectMeta *openapi3.Schema
}

// typed gives the k8s.io/api type of each built-in kind the chart renders.
var typed = map[string]func() any{
	"apps/v1 StatefulSet":           func() any { return new(appsv1.StatefulSet) },
	"batch/v1 CronJob":              func() any { return new(batchv1.CronJob) },
	"v1 Secret":                     func() any { return new(corev1.Secret) },
	"v1 Service":                    func() any { return new(corev1.Service) },
	"v1 ServiceAccount":             func() any { return new(corev1.ServiceAccount) },
	"policy/v1 PodDisruptionBudget": func() any { return new(policyv1.PodDisruptionBudget) },
}

var loadSchemas = sync.OnceValues(newValidator)

func schemas(t *testing.T) *validator {
	t.Helper()
	v, err := loadSchemas()
	if err != nil {
		t.Fatalf("schemas: %v", err)
	}
	return v
}

func newValidator() (*validator, error) {
	ctx := context.Background()
	b, err := os.ReadFile(filepath.Join("testdata", "kubernetes-openapi.json"))
	if err != nil {
		return nil, err
	}
	doc, err := openapi3.NewLoader().LoadFromData(b) // resolves every $ref
	if err != nil {
		return nil, fmt.Errorf("kubernetes-openapi.json: %w", err)
	}
	// Kubernetes gives defaults such as {} to fields whose type has required
	// fields: defaults are the API server's business, not checked here.
	if err := doc.Validate(ctx, openapi3.DisableSchemaDefaultsValidation(), openapi3.DisableExamplesValidation()); err != nil {
		return nil, fmt.Errorf("kubernetes-openapi.json: %w", err)
	}
	v := &validator{byGVK: map[string]*openapi3.Schema{}}
	for name, ref := range doc.Components.Schemas {
		s := ref.Value
		closeObjects(s, map[*openapi3.Schema]bool{})
		if name == "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" {
			v.objectMeta = s
		}
		gvks, _ := s.Extensions["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			m, _ := g.(map[string]any)
			group, _ := m["group"].(string)
			version, _ := m["version"].(string)
			kind, _ := m["kind"].(string)
			v.byGVK[apiVersion(group, version)+" "+kind] = s
		}
	}
	if v.objectMeta == nil {
		return nil, errors.New("kubernetes-openapi.json has no ObjectMeta")
	}
	for gvk := range typed {
		if v.byGVK[gvk] == nil {
			return nil, fmt.Errorf("kubernetes-openapi.json has no schema of %s: run go generate ./deploy/helm/charttest", gvk)
		}
	}

	// The ServiceMonitor: its CustomResourceDefinition's schema of v1.
	b, err = os.ReadFile(filepath.Join("testdata", "servicemonitor-crd.yaml"))
	if err != nil {
		return nil, err
	}
	var crd struct {
		Spec struct {
			Group    string
			Names    struct{ Kind string }
			Versions []struct {
				Name   string
				Schema struct {
					OpenAPIV3Schema json.RawMessage
				}
			}
		}
	}
	if err := yaml.Unmarshal(b, &crd); err != nil {
		return nil, fmt.Errorf("servicemonitor-crd.yaml: %w", err)
	}
	for _, ver := range crd.Spec.Versions {
		s := new(openapi3.Schema)
		if err := json.Unmarshal(ver.Schema.OpenAPIV3Schema, s); err != nil {
			return nil, fmt.Errorf("servicemonitor-crd.yaml %s: %w", ver.Name, err)
		}
		if err := s.Validate(ctx, openapi3.DisableSchemaDefaultsValidation(), openapi3.DisableExamplesValidation()); err != nil {
			return nil, fmt.Errorf("servicemonitor-crd.yaml %s: %w", ver.Name, err)
		}
		closeObjects(s, map[*openapi3.Schema]bool{})
		v.byGVK[apiVersion(crd.Spec.Group, ver.Name)+" "+crd.Spec.Names.Kind] = s
	}
	if v.byGVK["monitoring.coreos.com/v1 ServiceMonitor"] == nil {
		return nil, errors.New("servicemonitor-crd.yaml has no monitoring.coreos.com/v1 ServiceMonitor")
	}
	return v, nil
}

func apiVersion(group, version string) string {
	if group == "" {
		return version
	}
	return group + "/" + version
}

// closeObjects sets additionalProperties: false on s and every schema in it
// that lists properties and says nothing of others: the fields of a
// Kubernetes type are all its properties. A schema that keeps unknown
// fields (x-kubernetes-preserve-unknown-fields) stays open.
func closeObjects(s *openapi3.Schema, seen map[*openapi3.Schema]bool) {
	if s == nil || seen[s] {
		return
	}
	seen[s] = true
	if len(s.Properties) > 0 && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil &&
		s.Extensions["x-kubernetes-preserve-unknown-fields"] != true {
		closed := false
		s.AdditionalProperties.Has = &closed
	}
	for _, p := range s.Properties {
		closeObjects(p.Value, seen)
	}
	if s.Items != nil {
		closeObjects(s.Items.Value, seen)
	}
	if s.AdditionalProperties.Schema != nil {
		closeObjects(s.AdditionalProperties.Schema.Value, seen)
	}
	for _, list := range []openapi3.SchemaRefs{s.AllOf, s.AnyOf, s.OneOf} {
		for _, r := range list {
			closeObjects(r.Value, seen)
		}
	}
}

// validate checks o against the schema of its apiVersion and kind, and
// decodes it strictly into its k8s.io/api type.
func (v *validator) validate(o object) error {
	gvk := o.apiVersion() + " " + o.kind()
	s := v.byGVK[gvk]
	if s == nil {
		return fmt.Errorf("no schema of %s in testdata: add it to TestUpdateSchemas", gvk)
	}
	// The JSON form, as the API server receives it.
	b, err := json.Marshal(o.m)
	if err != nil {
		return err
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return err
	}
	var errs []error
	if err := s.VisitJSON(doc, openapi3.MultiErrors(), openapi3.EnableFormatValidation()); err != nil {
		errs = append(errs, fmt.Errorf("schema of %s: %w", gvk, err))
	}
	if newTyped, ok := typed[gvk]; ok {
		if err := strictDecode(b, newTyped()); err != nil {
			errs = append(errs, fmt.Errorf("decoding into the %s type: %w", gvk, err))
		}
	} else {
		// A custom resource's schema leaves metadata to the API server.
		md := doc.(map[string]any)["metadata"]
		if err := v.objectMeta.VisitJSON(md, openapi3.MultiErrors()); err != nil {
			errs = append(errs, fmt.Errorf("metadata: %w", err))
		}
	}
	return errors.Join(errs...)
}

// strictDecode decodes the JSON b into out, refusing unknown fields.
func strictDecode(b []byte, out any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(out)
}

// TestSchemas_EveryKindRendered checks that every kind the chart can render
// has its schema in testdata: the value sets below render each of them.
func TestSchemas_EveryKindRendered(t *testing.T) {
	seen := map[string]bool{}
	for _, vals := range []map[string]any{
		values(t, []string{"etcd-values.yaml"}, cronJobOn, "serviceMonitor: {enabled: true}"),
		values(t, []string{"postgres-values.yaml"}),
	} {
		for _, o := range render(t, vals).objects {
			seen[o.apiVersion()+" "+o.kind()] = true
		}
	}
	v := schemas(t)
	for gvk := range v.byGVK {
		if !seen[gvk] && (typed[gvk] != nil || strings.HasPrefix(gvk, "monitoring.coreos.com/v1 ")) {
			t.Errorf("no value set renders %s", gvk)
		}
	}
}

// TestSchemas_RejectWrongObjects proves that the validation fails on wrong
// objects: an unknown (misspelled) field at the top, deep in a pod
// template and in the ServiceMonitor, values of the wrong type, a missing
// required field and a value outside an enum (the ServiceMonitor's: the
// Kubernetes schemas list none). Each must be caught by the schema
// itself, and (for a built-in kind) by the strict decoding as well where
// Go's types can tell.
func TestSchemas_RejectWrongObjects(t *testing.T) {
	r := render(t, values(t, []string{"etcd-values.yaml"}, cronJobOn, "serviceMonitor: {enabled: true}"))
	find := func(kind string) object {
		for _, o := range r.objects {
			if o.kind() == kind {
				return o
			}
		}
		t.Fatalf("no %s", kind)
		return object{}
	}
	cases := []struct {
		name, kind   string
		change       func(m map[string]any)
		want         string // in the schema's error
		typedCatches bool
	}{
		{"misspelled top-level field", "StatefulSet", func(m map[string]any) {
			spec := m["spec"].(map[string]any)
			spec["replcas"] = spec["replicas"]
			delete(spec, "replicas")
		}, "replcas", true},
		{"misspelled field of a probe", "StatefulSet", func(m map[string]any) {
			hg := dig(m, "spec", "template", "spec", "containers", 0, "readinessProbe", "httpGet").(map[string]any)
			hg["pth"] = hg["path"]
			delete(hg, "path")
		}, "pth", true},
		{"string where an integer goes", "StatefulSet", func(m map[string]any) {
			m["spec"].(map[string]any)["replicas"] = "three"
		}, "replicas", true},
		{"missing required field", "StatefulSet", func(m map[string]any) {
			delete(dig(m, "spec", "template", "spec", "containers", 0).(map[string]any), "name")
		}, "name", false},
		{"an object where a list goes", "Service", func(m map[string]any) {
			spec := m["spec"].(map[string]any)
			spec["ports"] = spec["ports"].([]any)[0]
		}, "ports", true},
		{"unknown enum value", "ServiceMonitor", func(m map[string]any) {
			dig(m, "spec", "endpoints", 0).(map[string]any)["scheme"] = "tcp"
		}, "tcp", false},
		{"misspelled field of a CronJob's container", "CronJob", func(m map[string]any) {
			c := dig(m, "spec", "jobTemplate", "spec", "template", "spec", "containers", 0).(map[string]any)
			c["comand"] = c["command"]
			delete(c, "command")
		}, "comand", true},
		{"misspelled field of a ServiceMonitor endpoint", "ServiceMonitor", func(m map[string]any) {
			ep := dig(m, "spec", "endpoints", 0).(map[string]any)
			ep["intervall"] = ep["interval"]
			delete(ep, "interval")
		}, "intervall", false},
		{"misspelled metadata of a ServiceMonitor", "ServiceMonitor", func(m map[string]any) {
			md := m["metadata"].(map[string]any)
			md["label"] = md["labels"]
			delete(md, "labels")
		}, "label", false},
	}
	v := schemas(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := find(tc.kind)
			if err := v.validate(o); err != nil {
				t.Fatalf("the object as rendered is refused: %v", err)
			}
			m := deepCopy(t, o.m)
			tc.change(m)
			bad := object{file: o.file, m: m}
			err := v.validate(bad)
			if err == nil {
				t.Fatalf("the wrong %s passed validation", tc.kind)
			}
			var schemaErr, typedErr string
			for _, e := range unjoin(err) {
				if strings.HasPrefix(e.Error(), "decoding into") {
					typedErr = e.Error()
				} else {
					schemaErr = e.Error()
				}
			}
			if !strings.Contains(schemaErr, tc.want) {
				t.Errorf("the schema's error does not name %q: %q", tc.want, schemaErr)
			}
			if tc.typedCatches && typedErr == "" {
				t.Errorf("the strict decoding did not refuse it")
			}
		})
	}
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// dig walks m by keys (string) and indexes (int).
func dig(v any, path ...any) any {
	for _, p := range path {
		switch p := p.(type) {
		case string:
			v = v.(map[string]any)[p]
		case int:
			v = v.([]any)[p]
		}
	}
	return v
}

func deepCopy(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
