package charttest

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// cronJobOn turns the CronJob example on, with the job's token from a Secret.
const cronJobOn = "cronJob: {enabled: true, authTokenSecret: {name: fence-job}}"

// The stable DNS name each server advertises: $(POD_NAME) is expanded by
// Kubernetes from the env var of that name.
const advertiseEtcd = "--advertise=http://$(POD_NAME).fence-headless.locks.svc.cluster.local:7700"

func container(t *testing.T, sts *appsv1.StatefulSet) corev1.Container {
	t.Helper()
	if n := len(sts.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("%d containers", n)
	}
	return sts.Spec.Template.Spec.Containers[0]
}

func env(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func volume(sts *appsv1.StatefulSet, name string) *corev1.Volume {
	for i := range sts.Spec.Template.Spec.Volumes {
		if sts.Spec.Template.Spec.Volumes[i].Name == name {
			return &sts.Spec.Template.Spec.Volumes[i]
		}
	}
	return nil
}

// secretItems lists the files of a projected volume as SECRET:KEY->PATH.
func secretItems(vol *corev1.Volume) []string {
	var items []string
	for _, s := range vol.Projected.Sources {
		for _, it := range s.Secret.Items {
			items = append(items, s.Secret.Name+":"+it.Key+"->"+it.Path)
		}
	}
	return items
}

// subset reports whether every label of sel is in labels.
func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

// TestChart_Etcd: three servers on etcd, each advertising its stable DNS
// name, probed on /readyz and /healthz, the auth file from an existing
// Secret, a PodDisruptionBudget, locked down.
func TestChart_Etcd(t *testing.T) {
	r := render(t, values(t, []string{"etcd-values.yaml"}))
	want := []string{
		"PodDisruptionBudget/fence", "Service/fence", "Service/fence-headless",
		"ServiceAccount/fence", "StatefulSet/fence",
	}
	if got := r.kinds(); !slices.Equal(got, want) {
		t.Errorf("objects %v, want %v", got, want)
	}

	var sts appsv1.StatefulSet
	r.get(t, "StatefulSet", "fence", &sts)
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 3 {
		t.Errorf("replicas %v, want 3", sts.Spec.Replicas)
	}
	if sts.Spec.ServiceName != "fence-headless" {
		t.Errorf("serviceName %q, want the headless Service", sts.Spec.ServiceName)
	}
	podLabels := sts.Spec.Template.Labels
	if !subset(sts.Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("selector %v does not select the pods %v", sts.Spec.Selector.MatchLabels, podLabels)
	}
	c := container(t, &sts)
	for _, arg := range []string{
		advertiseEtcd,
		"--store=etcd://etcd-0.etcd:2379,etcd-1.etcd:2379,etcd-2.etcd:2379/fence",
		"--auth-file=/etc/fence/secrets/auth",
		"--log-level=info",
	} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %q lack %s", c.Args, arg)
		}
	}
	for _, arg := range c.Args {
		if strings.HasPrefix(arg, "--signing-key") || arg == "--insecure-listen" || strings.HasPrefix(arg, "--tls-") {
			t.Errorf("args %q: %s without its value set", c.Args, arg)
		}
	}
	if c.Command != nil {
		t.Errorf("command %q: the image's entrypoint (fence serve) should run", c.Command)
	}
	podName := env(c, "POD_NAME")
	if podName == nil || podName.ValueFrom == nil || podName.ValueFrom.FieldRef == nil || podName.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("POD_NAME is not the pod's name: %+v", podName)
	}
	if e := env(c, "FENCE_STORE"); e != nil {
		t.Errorf("FENCE_STORE set beside --store: %+v", e)
	}

	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 7700 {
		t.Errorf("ports %+v, want http 7700 (the image's --listen)", c.Ports)
	}
	for name, p := range map[string]*corev1.Probe{"/readyz": c.ReadinessProbe, "/healthz": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != name || p.HTTPGet.Port.String() != "http" || p.HTTPGet.Scheme != corev1.URISchemeHTTP {
			t.Errorf("probe of %s: %+v", name, p)
		}
	}

	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v", sc)
	}
	psc := sts.Spec.Template.Spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 {
		t.Errorf("pod securityContext %+v, want the image's nonroot user", psc)
	}
	if a := sts.Spec.Template.Spec.AutomountServiceAccountToken; a == nil || *a {
		t.Error("the pods get a service account token: fence calls no Kubernetes API")
	}
	if sts.Spec.Template.Spec.Affinity == nil || sts.Spec.Template.Spec.Affinity.PodAntiAffinity == nil {
		t.Error("no pod anti-affinity: the servers may share a node")
	}

	// The auth file from the Secret named by value, at --auth-file.
	vol := volume(&sts, "secrets")
	if vol == nil || vol.Projected == nil || len(vol.Projected.Sources) != 1 {
		t.Fatalf("secrets volume %+v", vol)
	}
	src := vol.Projected.Sources[0].Secret
	if src == nil || src.Name != "fence-auth" || len(src.Items) != 1 || src.Items[0].Key != "auth" || src.Items[0].Path != "auth" {
		t.Errorf("auth file source %+v", src)
	}
	if m := c.VolumeMounts; len(m) != 1 || m[0].Name != "secrets" || m[0].MountPath != "/etc/fence/secrets" || !m[0].ReadOnly {
		t.Errorf("mounts %+v", m)
	}
	if _, ok := sts.Spec.Template.Annotations["checksum/secrets"]; ok {
		t.Error("checksum/secrets without a Secret made by the chart")
	}

	var headless, client corev1.Service
	r.get(t, "Service", "fence-headless", &headless)
	r.get(t, "Service", "fence", &client)
	if headless.Spec.ClusterIP != "None" || !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("headless Service: clusterIP %q, publishNotReadyAddresses %v", headless.Spec.ClusterIP, headless.Spec.PublishNotReadyAddresses)
	}
	for _, svc := range []corev1.Service{headless, client} {
		if !subset(svc.Spec.Selector, podLabels) {
			t.Errorf("Service %s selects %v, not the pods %v", svc.Name, svc.Spec.Selector, podLabels)
		}
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != "http" {
			t.Errorf("Service %s ports %+v", svc.Name, svc.Spec.Ports)
		}
	}
	if client.Spec.ClusterIP == "None" || client.Spec.Ports[0].Port != 7700 {
		t.Errorf("client Service %+v", client.Spec)
	}

	var pdb policyv1.PodDisruptionBudget
	r.get(t, "PodDisruptionBudget", "fence", &pdb)
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil {
		t.Errorf("PodDisruptionBudget maxUnavailable %v minAvailable %v, want 1", pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable)
	}
	if !subset(pdb.Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("PodDisruptionBudget selects %v, not the pods %v", pdb.Spec.Selector.MatchLabels, podLabels)
	}

	for _, want := range []string{
		"FENCE_ADDR=http://fence.locks.svc.cluster.local:7700",
		"FENCE_ADDR=http://fence-0.fence-headless.locks.svc.cluster.local:7700,http://fence-1.fence-headless.locks.svc.cluster.local:7700,http://fence-2.fence-headless.locks.svc.cluster.local:7700",
		"rollout restart statefulset/fence",
	} {
		if !strings.Contains(r.notes, want) {
			t.Errorf("NOTES.txt lacks %q:\n%s", want, r.notes)
		}
	}
}

// TestChart_Postgres: the DSN, auth file and signing key given as values go
// into Secrets the chart makes, never into the StatefulSet; the DSN reaches
// fence as FENCE_STORE.
func TestChart_Postgres(t *testing.T) {
	vals := values(t, []string{"postgres-values.yaml"})
	r := render(t, vals)
	for _, name := range []string{"fence-auth", "fence-signing-key", "fence-store"} {
		if !r.has("Secret", name) {
			t.Errorf("no Secret %s in %v", name, r.kinds())
		}
	}
	dsn := vals["store"].(map[string]any)["postgres"].(map[string]any)["url"].(string)
	secretData := func(name, key string) string {
		var s corev1.Secret
		r.get(t, "Secret", name, &s)
		if len(s.Data) != 1 {
			t.Errorf("Secret %s has keys %v, want %s", name, slices.Collect(maps.Keys(s.Data)), key)
		}
		return string(s.Data[key])
	}
	if got := secretData("fence-store", "store-url"); got != dsn {
		t.Errorf("fence-store holds %q, want the DSN", got)
	}
	if got := secretData("fence-auth", "auth"); !strings.HasPrefix(got, "ops 60303ae2") {
		t.Errorf("fence-auth holds %q", got)
	}
	if got := secretData("fence-signing-key", "signing.key"); !strings.HasPrefix(got, "fence-ed25519-v1:") {
		t.Errorf("fence-signing-key holds %q", got)
	}

	var sts appsv1.StatefulSet
	r.get(t, "StatefulSet", "fence", &sts)
	for _, o := range r.objects {
		if o.kind() != "Secret" && strings.Contains(string(o.yaml), "secret@db1") {
			t.Errorf("%v holds the DSN's password in clear", o)
		}
	}
	c := container(t, &sts)
	for _, arg := range c.Args {
		if strings.HasPrefix(arg, "--store") {
			t.Errorf("args %q: --store beside FENCE_STORE", c.Args)
		}
	}
	e := env(c, "FENCE_STORE")
	if e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
		e.ValueFrom.SecretKeyRef.Name != "fence-store" || e.ValueFrom.SecretKeyRef.Key != "store-url" {
		t.Errorf("FENCE_STORE %+v, want fence-store's store-url", e)
	}
	for _, arg := range []string{advertiseEtcd, "--auth-file=/etc/fence/secrets/auth", "--signing-key=/etc/fence/secrets/signing.key"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %q lack %s", c.Args, arg)
		}
	}
	vol := volume(&sts, "secrets")
	if vol == nil || vol.Projected == nil {
		t.Fatalf("secrets volume %+v", vol)
	}
	if m := vol.Projected.DefaultMode; m == nil || *m != 0o440 {
		t.Errorf("secrets mode %v, want 0440 (the group fsGroup reads them)", m)
	}
	paths := secretItems(vol)
	if want := []string{"fence-auth:auth->auth", "fence-signing-key:signing.key->signing.key"}; !slices.Equal(paths, want) {
		t.Errorf("secrets volume %v, want %v", paths, want)
	}
	sum := sts.Spec.Template.Annotations["checksum/secrets"]
	if len(sum) != 64 {
		t.Errorf("checksum/secrets %q: a change of the Secrets would not restart the servers", sum)
	}

	// Another auth file restarts the servers; the same values do not.
	again := render(t, vals)
	other := render(t, merge(vals, map[string]any{"auth": map[string]any{"file": "ops2 00 admin:*\n"}}))
	var sts2, sts3 appsv1.StatefulSet
	again.get(t, "StatefulSet", "fence", &sts2)
	other.get(t, "StatefulSet", "fence", &sts3)
	if sts2.Spec.Template.Annotations["checksum/secrets"] != sum || sts3.Spec.Template.Annotations["checksum/secrets"] == sum {
		t.Error("checksum/secrets does not follow the Secrets' content")
	}
}

// TestChart_ExistingSecrets: Secrets named by value, with keys of their own,
// are used as they are and none is made.
func TestChart_ExistingSecrets(t *testing.T) {
	r := render(t, values(t, nil, `
store:
  type: postgres
  postgres: {existingSecret: pg, existingSecretKey: dsn}
auth: {existingSecret: tokens, existingSecretKey: fence-auth}
signingKey: {existingSecret: keys, existingSecretKey: fence.key}
`))
	for _, k := range r.kinds() {
		if strings.HasPrefix(k, "Secret/") {
			t.Errorf("made %s: the values name existing Secrets", k)
		}
	}
	var sts appsv1.StatefulSet
	r.get(t, "StatefulSet", "fence", &sts)
	c := container(t, &sts)
	if e := env(c, "FENCE_STORE"); e == nil || e.ValueFrom.SecretKeyRef.Name != "pg" || e.ValueFrom.SecretKeyRef.Key != "dsn" {
		t.Errorf("FENCE_STORE %+v, want pg's dsn", e)
	}
	paths := secretItems(volume(&sts, "secrets"))
	if want := []string{"tokens:fence-auth->auth", "keys:fence.key->signing.key"}; !slices.Equal(paths, want) {
		t.Errorf("secrets volume %v, want %v", paths, want)
	}
	if _, ok := sts.Spec.Template.Annotations["checksum/secrets"]; ok {
		t.Error("checksum/secrets without a Secret made by the chart")
	}

	// The whole etcd URL from a Secret (an etcd with a password).
	r = render(t, values(t, nil, "auth: {existingSecret: tokens}", "store: {etcd: {existingSecret: etcd-url}}"))
	r.get(t, "StatefulSet", "fence", &sts)
	c = container(t, &sts)
	if e := env(c, "FENCE_STORE"); e == nil || e.ValueFrom.SecretKeyRef.Name != "etcd-url" || e.ValueFrom.SecretKeyRef.Key != "store-url" {
		t.Errorf("FENCE_STORE %+v, want etcd-url's store-url", e)
	}
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--store") }) {
		t.Errorf("args %q: --store beside FENCE_STORE", c.Args)
	}
}

// TestChart_TLS: HTTPS between everyone: https advertise URLs, the probes
// over HTTPS, the certificate from its Secret; etcd over TLS with a client
// certificate.
func TestChart_TLS(t *testing.T) {
	r := render(t, values(t, []string{"etcd-values.yaml"}, cronJobOn, `
tls: {enabled: true, secretName: fence-tls}
store: {etcd: {tls: {enabled: true, secretName: etcd-client, clientCert: true}}}
serviceMonitor: {enabled: true, tlsConfig: {ca: {secret: {name: fence-tls, key: ca.crt}}}}
`))
	var sts appsv1.StatefulSet
	r.get(t, "StatefulSet", "fence", &sts)
	c := container(t, &sts)
	for _, arg := range []string{
		"--advertise=https://$(POD_NAME).fence-headless.locks.svc.cluster.local:7700",
		"--tls-cert=/etc/fence/tls/tls.crt", "--tls-key=/etc/fence/tls/tls.key", "--peer-cacert=/etc/fence/tls/ca.crt",
		"--store=etcds://etcd-0.etcd:2379,etcd-1.etcd:2379,etcd-2.etcd:2379/fence?cacert=/etc/fence/etcd/ca.crt&cert=/etc/fence/etcd/tls.crt&key=/etc/fence/etcd/tls.key",
	} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %q lack %s", c.Args, arg)
		}
	}
	if c.ReadinessProbe.HTTPGet.Scheme != corev1.URISchemeHTTPS || c.LivenessProbe.HTTPGet.Scheme != corev1.URISchemeHTTPS {
		t.Error("probes not over HTTPS")
	}
	for vol, secret := range map[string]string{"tls": "fence-tls", "etcd-tls": "etcd-client"} {
		if v := volume(&sts, vol); v == nil || v.Secret == nil || v.Secret.SecretName != secret {
			t.Errorf("volume %s: %+v, want the Secret %s", vol, v, secret)
		}
	}
	var cj batchv1.CronJob
	r.get(t, "CronJob", "fence-example", &cj)
	jc := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
	if e := env(jc, "FENCE_ADDR"); e == nil || !strings.HasPrefix(e.Value, "https://fence-0.") {
		t.Errorf("the job's FENCE_ADDR %+v, want https", e)
	}
	if e := env(jc, "FENCE_CACERT"); e == nil || e.Value != "/etc/fence/tls/ca.crt" {
		t.Errorf("the job's FENCE_CACERT %+v", e)
	}
	if !strings.Contains(r.notes, "https://fence.locks.svc.cluster.local:7700") {
		t.Errorf("NOTES.txt without https:\n%s", r.notes)
	}
}

// TestChart_Insecure: without an auth file, only when asked, and the
// image's FENCE_AUTH_FILE is cleared.
func TestChart_Insecure(t *testing.T) {
	r := render(t, values(t, nil, "store: {etcd: {endpoints: ['etcd:2379']}}", "auth: {insecure: true}", "cronJob: {enabled: true}"))
	var sts appsv1.StatefulSet
	r.get(t, "StatefulSet", "fence", &sts)
	c := container(t, &sts)
	if !slices.Contains(c.Args, "--insecure-listen") {
		t.Errorf("args %q lack --insecure-listen", c.Args)
	}
	if e := env(c, "FENCE_AUTH_FILE"); e == nil || e.Value != "" || e.ValueFrom != nil {
		t.Errorf("FENCE_AUTH_FILE %+v, want empty (the image sets /etc/fence/auth)", e)
	}
	if volume(&sts, "secrets") != nil {
		t.Error("a secrets volume without a Secret")
	}
	if !strings.Contains(r.notes, "WARNING") {
		t.Errorf("NOTES.txt does not warn:\n%s", r.notes)
	}
	var cj batchv1.CronJob
	r.get(t, "CronJob", "fence-example", &cj)
	if e := env(cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0], "FENCE_AUTH_TOKEN"); e != nil {
		t.Errorf("FENCE_AUTH_TOKEN %+v without authTokenSecret", e)
	}
}

// TestChart_ServiceMonitor: off by default; on, it scrapes /metrics of every
// server through the headless Service only (each server once), with a token
// when /metrics is protected.
func TestChart_ServiceMonitor(t *testing.T) {
	r := render(t, values(t, []string{"etcd-values.yaml"}, `
serviceMonitor: {enabled: true, interval: 15s, labels: {release: prometheus}, bearerTokenSecret: {name: fence-scrape}}
server: {protectMetrics: true}
`))
	var sm struct {
		Metadata struct{ Labels map[string]string }
		Spec     struct {
			Selector          struct{ MatchLabels map[string]string }
			NamespaceSelector struct{ MatchNames []string }
			Endpoints         []struct {
				Port, Path, Scheme, Interval string
				Authorization                struct {
					Type        string
					Credentials struct{ Name, Key string }
				}
			}
		}
	}
	var o object
	for _, x := range r.objects {
		if x.kind() == "ServiceMonitor" {
			o = x
		}
	}
	if o.m == nil {
		t.Fatalf("no ServiceMonitor in %v", r.kinds())
	}
	if o.apiVersion() != "monitoring.coreos.com/v1" {
		t.Errorf("apiVersion %s", o.apiVersion())
	}
	if err := yaml.Unmarshal(o.yaml, &sm); err != nil { // the schema checked it
		t.Fatal(err)
	}
	if sm.Metadata.Labels["release"] != "prometheus" {
		t.Errorf("labels %v lack serviceMonitor.labels", sm.Metadata.Labels)
	}
	var headless, client corev1.Service
	r.get(t, "Service", "fence-headless", &headless)
	r.get(t, "Service", "fence", &client)
	if !subset(sm.Spec.Selector.MatchLabels, headless.Labels) || subset(sm.Spec.Selector.MatchLabels, client.Labels) {
		t.Errorf("selector %v should match the headless Service %v only, not %v", sm.Spec.Selector.MatchLabels, headless.Labels, client.Labels)
	}
	if !slices.Equal(sm.Spec.NamespaceSelector.MatchNames, []string{namespace}) {
		t.Errorf("namespaceSelector %v", sm.Spec.NamespaceSelector.MatchNames)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("endpoints %+v", sm.Spec.Endpoints)
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Port != "http" || ep.Path != "/metrics" || ep.Scheme != "http" || ep.Interval != "15s" {
		t.Errorf("endpoint %+v", ep)
	}
	if ep.Authorization.Type != "Bearer" || ep.Authorization.Credentials.Name != "fence-scrape" || ep.Authorization.Credentials.Key != "token" {
		t.Errorf("authorization %+v", ep.Authorization)
	}
	var sts appsv1.StatefulSet
	r.get(t, "StatefulSet", "fence", &sts)
	if !slices.Contains(container(t, &sts).Args, "--protect-metrics") {
		t.Error("args lack --protect-metrics")
	}
}

// TestChart_CronJob: the example job runs fence lock against every server,
// with its token from a Secret; by default its job is a write under the
// lease's token.
func TestChart_CronJob(t *testing.T) {
	r := render(t, values(t, []string{"etcd-values.yaml"}, cronJobOn))
	var cj batchv1.CronJob
	r.get(t, "CronJob", "fence-example", &cj)
	if cj.Spec.Schedule != "*/5 * * * *" || cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("schedule %q, concurrencyPolicy %q", cj.Spec.Schedule, cj.Spec.ConcurrencyPolicy)
	}
	pod := cj.Spec.JobTemplate.Spec.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy %q", pod.RestartPolicy)
	}
	c := pod.Containers[0]
	if c.Image != "fence:v0.1.0" {
		t.Errorf("image %q, want fence's", c.Image)
	}
	want := []string{"fence", "lock", "example/nightly", "--ttl=30s", "--kill-grace=20s", "--conflict-exit-code=0", "--",
		"fence", "put", "example/nightly", "last-run", "$(POD_NAME)"}
	if !slices.Equal(c.Command, want) {
		t.Errorf("command %q, want %q", c.Command, want)
	}
	if e := env(c, "POD_NAME"); e == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("POD_NAME %+v: $(POD_NAME) would not expand", e)
	}
	addr := env(c, "FENCE_ADDR")
	wantAddr := "http://fence-0.fence-headless.locks.svc.cluster.local:7700,http://fence-1.fence-headless.locks.svc.cluster.local:7700,http://fence-2.fence-headless.locks.svc.cluster.local:7700"
	if addr == nil || addr.Value != wantAddr {
		t.Errorf("FENCE_ADDR %+v, want %s", addr, wantAddr)
	}
	if e := env(c, "FENCE_AUTH_TOKEN"); e == nil || e.ValueFrom.SecretKeyRef.Name != "fence-job" || e.ValueFrom.SecretKeyRef.Key != "token" {
		t.Errorf("FENCE_AUTH_TOKEN %+v", e)
	}
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("job securityContext %+v", c.SecurityContext)
	}

	// A job of its own, in an image of its own.
	r = render(t, values(t, []string{"etcd-values.yaml"}, cronJobOn, `
cronJob: {name: billing, resource: billing, schedule: "0 3 * * *", image: registry.example/billing:1.4, command: [/app/bill, --all]}
replicaCount: 5
`))
	r.get(t, "CronJob", "fence-billing", &cj)
	c = cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
	want = []string{"fence", "lock", "billing", "--ttl=30s", "--kill-grace=20s", "--conflict-exit-code=0", "--", "/app/bill", "--all"}
	if c.Image != "registry.example/billing:1.4" || !slices.Equal(c.Command, want) {
		t.Errorf("image %q command %q, want %q", c.Image, c.Command, want)
	}
	if n := strings.Count(env(c, "FENCE_ADDR").Value, ","); n != 4 {
		t.Errorf("FENCE_ADDR %q lists %d servers, want 5", env(c, "FENCE_ADDR").Value, n+1)
	}
}

// TestChart_Names: a long release name is cut so that every server's DNS
// name stays valid; overrides apply.
func TestChart_Names(t *testing.T) {
	r := render(t, values(t, []string{"etcd-values.yaml"}, "fullnameOverride: "+strings.Repeat("a", 70)))
	var sts appsv1.StatefulSet
	r.get(t, "StatefulSet", strings.Repeat("a", 52), &sts)
	for i := range 3 {
		pod := sts.Name + "-" + string(rune('0'+i))
		if errs := validation.IsDNS1123Label(pod); len(errs) > 0 {
			t.Errorf("pod %s: %v", pod, errs)
		}
	}
	if errs := validation.IsDNS1123Label(sts.Spec.ServiceName); len(errs) > 0 {
		t.Errorf("headless Service %s: %v", sts.Spec.ServiceName, errs)
	}
	r = render(t, values(t, []string{"etcd-values.yaml"}, "nameOverride: locks", "image: {repository: registry.example/fence, tag: v0.2.0}"))
	r.get(t, "StatefulSet", "fence-locks", &sts)
	if img := container(t, &sts).Image; img != "registry.example/fence:v0.2.0" {
		t.Errorf("image %q", img)
	}
}

// TestChart_BadValues: values that cannot work are refused at rendering,
// by values.schema.json or by the templates' checks, with a message that
// names the value to set.
func TestChart_BadValues(t *testing.T) {
	cases := []struct {
		name      string
		files     []string
		overrides []string
		want      string
	}{
		{"no store", nil, []string{"auth: {insecure: true}"}, "set store.etcd.endpoints"},
		{"postgres without DSN", nil, []string{"auth: {insecure: true}", "store: {type: postgres}"}, "set store.postgres.existingSecret"},
		{"no auth file", nil, []string{"store: {etcd: {endpoints: ['etcd:2379']}}"}, "need an auth file"},
		{"two auth files", []string{"etcd-values.yaml"}, []string{"auth: {file: x}"}, "not both"},
		{"auth file and insecure", []string{"etcd-values.yaml"}, []string{"auth: {insecure: true}"}, "auth.insecure=true"},
		{"two signing keys", []string{"postgres-values.yaml"}, []string{"signingKey: {existingSecret: k}"}, "not both"},
		{"TLS without its Secret", []string{"etcd-values.yaml"}, []string{"tls: {enabled: true}"}, "tls.secretName"},
		{"etcd client certificate without its Secret", []string{"etcd-values.yaml"}, []string{"store: {etcd: {tls: {enabled: true, clientCert: true}}}"}, "store.etcd.tls.secretName"},
		{"CronJob without a token", []string{"etcd-values.yaml"}, []string{"cronJob: {enabled: true}"}, "cronJob.authTokenSecret.name"},
		{"protected metrics without a token to scrape", []string{"etcd-values.yaml"}, []string{"server: {protectMetrics: true}", "serviceMonitor: {enabled: true}"}, "serviceMonitor.bearerTokenSecret.name"},
		{"protected metrics without auth", nil, []string{"store: {etcd: {endpoints: ['etcd:2379']}}", "auth: {insecure: true}", "server: {protectMetrics: true}"}, "server.protectMetrics needs an auth file"},
		// values.schema.json
		{"unknown store", []string{"etcd-values.yaml"}, []string{"store: {type: redis}"}, "/store/type"},
		{"no servers", []string{"etcd-values.yaml"}, []string{"replicaCount: 0"}, "replicaCount"},
		{"misspelled value", []string{"etcd-values.yaml"}, []string{"replicas: 5"}, "replicas"},
		{"endpoint with a scheme", nil, []string{"store: {etcd: {endpoints: ['http://etcd:2379']}}", "auth: {insecure: true}"}, "endpoints"},
		{"not a signing key", []string{"etcd-values.yaml"}, []string{"signingKey: {key: '-----BEGIN PRIVATE KEY-----'}"}, "/signingKey/key"},
		{"bad duration", []string{"etcd-values.yaml"}, []string{"server: {electionTTL: 2}"}, "electionTTL"},
		{"DSN of another database", []string{"postgres-values.yaml"}, []string{"store: {postgres: {url: 'mysql://db/fence'}}"}, "/store/postgres/url"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderChart(values(t, tc.files, tc.overrides...))
			if err == nil {
				t.Fatal("rendered")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %q", err, tc.want)
			}
		})
	}
}

// TestChart_SecretsAreBase64: Secrets made from values hold the text given,
// whatever characters it has.
func TestChart_SecretsAreBase64(t *testing.T) {
	text := "a \"quoted\" line\n# and: yaml-ish {things}\n"
	r := render(t, values(t, []string{"etcd-values.yaml"}, "auth: {existingSecret: ''}", "auth: {file: "+quoteYAML(text)+"}"))
	var s corev1.Secret
	r.get(t, "Secret", "fence-auth", &s)
	if got := string(s.Data["auth"]); got != text {
		t.Errorf("auth %q, want %q", got, text)
	}
	for _, o := range r.objects {
		if o.kind() == "Secret" && !strings.Contains(string(o.yaml), base64.StdEncoding.EncodeToString([]byte(text))) {
			t.Errorf("%v: data not base64 of the text", o)
		}
	}
}

// quoteYAML quotes s as a YAML scalar (JSON's string syntax is YAML's).
func quoteYAML(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
