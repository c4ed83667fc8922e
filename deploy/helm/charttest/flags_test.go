package charttest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// flagDef matches a flag's definition in cmd/fence: fs.StringVar(&x,
// "name", ...), fs.Func("name", ...) and the like.
var flagDef = regexp.MustCompile(`\bfs\.(?:\w+Var\(&[^,]+|Func\(|Var\([^,]+), "([a-z0-9-]+)"`)

// flagsOf returns the flags defined in the files of cmd/fence named.
func flagsOf(t *testing.T, files ...string) map[string]bool {
	t.Helper()
	flags := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", "cmd", "fence", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range flagDef.FindAllStringSubmatch(string(b), -1) {
			flags[m[1]] = true
		}
	}
	if len(flags) < 5 {
		t.Fatalf("found only the flags %v in %v", flags, files)
	}
	return flags
}

// envTwin returns the flag of which the environment variable name is the
// twin (FENCE_AUTH_FILE: auth-file), or "" for another variable.
func envTwin(name string) string {
	rest, ok := strings.CutPrefix(name, "FENCE_")
	if !ok {
		return ""
	}
	return strings.ReplaceAll(strings.ToLower(rest), "_", "-")
}

// flagName returns the name of the flag arg (--name or --name=value), or ""
// for an argument that is not a flag.
func flagName(arg string) string {
	if !strings.HasPrefix(arg, "-") || arg == "--" {
		return ""
	}
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	return name
}

// TestFlags_Exist checks that every flag and FENCE_* variable the chart
// gives fence serve and fence lock is one that they define: a flag renamed
// in cmd/fence, or misspelled in a template, fails here rather than in a
// crash-looping pod.
func TestFlags_Exist(t *testing.T) {
	serve := flagsOf(t, "serve.go")
	lock := flagsOf(t, "lock.go", "common.go")
	r := render(t, values(t, []string{"postgres-values.yaml"}, cronJobOn, `
tls: {enabled: true, secretName: fence-tls}
server: {electionTTL: 3s, lockDelay: 5s, protectMetrics: true}
`))
	var sts appsv1.StatefulSet
	r.get(t, "StatefulSet", "fence", &sts)
	c := container(t, &sts)
	check := func(what string, c corev1.Container, args []string, flags map[string]bool) {
		t.Helper()
		n := 0
		for _, arg := range args {
			if name := flagName(arg); name != "" {
				n++
				if !flags[name] {
					t.Errorf("%s: --%s is not a flag of it (%s)", what, name, arg)
				}
			}
		}
		for _, e := range c.Env {
			if twin := envTwin(e.Name); twin != "" {
				n++
				if !flags[twin] {
					t.Errorf("%s: %s is the twin of no flag of it", what, e.Name)
				}
			}
		}
		if n < 3 {
			t.Errorf("%s: only %d flags checked", what, n)
		}
	}
	check("fence serve", c, c.Args, serve)
	for _, want := range []string{"advertise", "store", "auth-file", "signing-key", "tls-cert", "election-ttl", "lock-delay", "protect-metrics"} {
		given := slices.ContainsFunc(c.Args, func(a string) bool { return flagName(a) == want }) || env(c, "FENCE_"+strings.ToUpper(strings.ReplaceAll(want, "-", "_"))) != nil
		if !given {
			t.Errorf("fence serve is not given --%s", want)
		}
	}

	var cj batchv1.CronJob
	r.get(t, "CronJob", "fence-example", &cj)
	jc := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
	sep := slices.Index(jc.Command, "--")
	if sep < 0 || !slices.Equal(jc.Command[:2], []string{"fence", "lock"}) {
		t.Fatalf("command %q", jc.Command)
	}
	check("fence lock", jc, jc.Command[2:sep], lock)
}
