package chartcheck

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// chartDir is the chart under test, and repoRoot the timerq checkout it
// belongs to, both relative to this package.
const (
	chartDir = "../timerq"
	repoRoot = "../../.."
)

// helmBin is the helm binary the tests run: $TIMERQ_HELM, or one built by
// TestMain from the version pinned in go.mod's tool line.
var helmBin string

// tmpRoot is the tests' scratch directory, removed by TestMain; helmHome,
// inside it, is an empty directory for helm's cache, config and data.
var tmpRoot, helmHome string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	var err error
	if tmpRoot, err = os.MkdirTemp("", "chartcheck"); err != nil {
		fmt.Fprintln(os.Stderr, "chartcheck:", err)
		return 1
	}
	defer os.RemoveAll(tmpRoot)
	helmHome = filepath.Join(tmpRoot, "helm-home")
	helmBin = os.Getenv("TIMERQ_HELM")
	if helmBin == "" {
		helmBin = filepath.Join(tmpRoot, "helm")
		build := exec.Command("go", "build", "-o", helmBin, "helm.sh/helm/v4/cmd/helm")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "chartcheck: building helm from go.mod's tool line:", err)
			return 1
		}
	}
	return m.Run()
}

// object is one rendered manifest: its kind and name, and its YAML.
type object struct {
	Kind, Name string
	YAML       []byte
}

// baseArgs are the values every render needs: the chart refuses to render
// without a Redis Secret.
var baseArgs = []string{"--set", "redis.existingSecret=timerq-redis"}

// render runs `helm template` on the chart with args and returns its
// objects, failing the test if helm fails.
func render(t *testing.T, args ...string) []object {
	t.Helper()
	out, err := helmTemplate(args...)
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return splitManifests(t, out)
}

// helmTemplate runs `helm template` and returns its output, stderr
// included, so that a refusal's message can be checked.
func helmTemplate(args ...string) ([]byte, error) {
	cmd := execHelm(append([]string{"template", "rel", chartDir, "--namespace", "timers"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// execHelm is a helm command that reads no user configuration: its
// cache, config and data directories are empty ones of its own.
func execHelm(args ...string) *exec.Cmd {
	cmd := exec.Command(helmBin, args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+helmHome, "HELM_CONFIG_HOME="+helmHome, "HELM_DATA_HOME="+helmHome)
	return cmd
}

func splitManifests(t *testing.T, out []byte) []object {
	t.Helper()
	var objs []object
	for _, doc := range strings.Split("\n"+string(out), "\n---\n") {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("a rendered manifest is not YAML: %v\n%s", err, doc)
		}
		if meta.Kind == "" || meta.Metadata.Name == "" {
			t.Fatalf("a rendered manifest has no kind or name:\n%s", doc)
		}
		objs = append(objs, object{Kind: meta.Kind, Name: meta.Metadata.Name, YAML: []byte(doc)})
	}
	return objs
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// ofKind returns the objects of kind.
func ofKind(objs []object, kind string) []object {
	var r []object
	for _, o := range objs {
		if o.Kind == kind {
			r = append(r, o)
		}
	}
	return r
}

// one returns the only object of kind named name, failing if there is not
// exactly one.
func one(t *testing.T, objs []object, kind, name string) object {
	t.Helper()
	var found []object
	for _, o := range ofKind(objs, kind) {
		if o.Name == name {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s %q, rendered %d; objects: %v", kind, name, len(found), names(objs))
	}
	return found[0]
}

func names(objs []object) []string {
	var r []string
	for _, o := range objs {
		r = append(r, o.Kind+"/"+o.Name)
	}
	return r
}

// decode parses o strictly into v: a field the Kubernetes type does not
// have (a typo in a template) fails the test.
func decode(t *testing.T, o object, v any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(o.YAML, v); err != nil {
		t.Fatalf("%s/%s does not parse as a %s: %v\n%s", o.Kind, o.Name, o.Kind, err, o.YAML)
	}
}

func deployment(t *testing.T, objs []object, name string) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	decode(t, one(t, objs, "Deployment", name), &d)
	return &d
}

func pdb(t *testing.T, objs []object, name string) *policyv1.PodDisruptionBudget {
	t.Helper()
	var p policyv1.PodDisruptionBudget
	decode(t, one(t, objs, "PodDisruptionBudget", name), &p)
	return &p
}

func service(t *testing.T, objs []object, name string) *corev1.Service {
	t.Helper()
	var s corev1.Service
	decode(t, one(t, objs, "Service", name), &s)
	return &s
}

func secret(t *testing.T, objs []object, name string) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	decode(t, one(t, objs, "Secret", name), &s)
	return &s
}

func container(t *testing.T, d *appsv1.Deployment, name string) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container %q", d.Name, name)
	return corev1.Container{}
}

func envVar(c corev1.Container, name string) (corev1.EnvVar, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e, true
		}
	}
	return corev1.EnvVar{}, false
}

// selects reports whether selector's labels are all among labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}
