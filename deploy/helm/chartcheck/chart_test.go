package chartcheck

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const (
	workerName    = "rel-timerq-worker"
	dashboardName = "rel-timerq-dashboard"
	apiName       = "rel-timerq-api"
)

// apiArgs turn the HTTP API on, served by the workers (api.claim's
// default); apiOnlyArgs serve it from the API-only Deployment instead.
var (
	apiArgs     = []string{"--set", "api.enabled=true", "--set", "api.tokens.existingSecret=timerq-api-tokens"}
	apiOnlyArgs = append(append([]string{}, apiArgs...), "--set", "api.claim=false")
)

// argv joins argument lists into a new slice, so that no render shares
// (and overwrites) another's backing array.
func argv(lists ...[]string) []string {
	var r []string
	for _, l := range lists {
		r = append(r, l...)
	}
	return r
}

// TestWorkerProbes: liveness on /healthz and readiness on /readyz, on the
// container port that TIMERQ_METRICS_ADDR makes timerworker listen on.
func TestWorkerProbes(t *testing.T) {
	objs := render(t, append(baseArgs, "--set", "worker.metricsPort=9464")...)
	c := container(t, deployment(t, objs, workerName), "timerworker")
	for _, p := range []struct {
		kind  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Fatalf("%s probe: want an httpGet probe, got %+v", p.kind, p.probe)
		}
		if p.probe.HTTPGet.Path != p.path {
			t.Errorf("%s probe path %q, want %q", p.kind, p.probe.HTTPGet.Path, p.path)
		}
		if got := containerPort(t, c, p.probe.HTTPGet.Port.String()); got != 9464 {
			t.Errorf("%s probe port %v is container port %d, want 9464", p.kind, p.probe.HTTPGet.Port.String(), got)
		}
	}
	addr, ok := envVar(c, "TIMERQ_METRICS_ADDR")
	if !ok || addr.Value != ":9464" {
		t.Errorf("TIMERQ_METRICS_ADDR = %+v, want :9464 so that timerworker serves the probed port", addr)
	}
}

// containerPort resolves a probe's port, a name or a number.
func containerPort(t *testing.T, c corev1.Container, port string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == port || p.ContainerPort > 0 && port == strconv.Itoa(int(p.ContainerPort)) {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port %q", c.Name, port)
	return 0
}

// TestWorkerReplicasAndResources: replicas and resources come from values.
func TestWorkerReplicasAndResources(t *testing.T) {
	objs := render(t, append(baseArgs, "--set", "worker.replicas=5", "--set", "worker.resources.limits.memory=300Mi")...)
	d := deployment(t, objs, workerName)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 5 {
		t.Errorf("replicas %v, want 5", d.Spec.Replicas)
	}
	c := container(t, d, "timerworker")
	if got := c.Resources.Limits.Memory().String(); got != "300Mi" {
		t.Errorf("memory limit %s, want 300Mi", got)
	}
	if c.Resources.Requests.Cpu().IsZero() {
		t.Error("no CPU request by default")
	}
}

// TestSecurityContext: every container of the chart runs as non-root, on
// a read-only root filesystem, with no capabilities, no privilege
// escalation and the runtime's default seccomp profile.
func TestSecurityContext(t *testing.T) {
	objs := render(t, argv(baseArgs, dashboardArgs, apiOnlyArgs)...)
	for _, name := range []string{workerName, dashboardName, apiName} {
		d := deployment(t, objs, name)
		ps := d.Spec.Template.Spec.SecurityContext
		if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
			t.Errorf("%s: pod securityContext.runAsNonRoot not true: %+v", name, ps)
		}
		if ps == nil || ps.RunAsUser == nil || *ps.RunAsUser == 0 {
			t.Errorf("%s: pod securityContext.runAsUser not a non-zero UID", name)
		}
		if ps == nil || ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: pod seccompProfile not RuntimeDefault", name)
		}
		if a := d.Spec.Template.Spec.AutomountServiceAccountToken; a == nil || *a {
			t.Errorf("%s: mounts a service account token it never uses", name)
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			s := c.SecurityContext
			if s == nil {
				t.Errorf("%s/%s: no securityContext", name, c.Name)
				continue
			}
			if s.RunAsNonRoot == nil || !*s.RunAsNonRoot {
				t.Errorf("%s/%s: runAsNonRoot not true", name, c.Name)
			}
			if s.ReadOnlyRootFilesystem == nil || !*s.ReadOnlyRootFilesystem {
				t.Errorf("%s/%s: readOnlyRootFilesystem not true", name, c.Name)
			}
			if s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation {
				t.Errorf("%s/%s: allowPrivilegeEscalation not false", name, c.Name)
			}
			if s.Capabilities == nil || !reflect.DeepEqual(s.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(s.Capabilities.Add) > 0 {
				t.Errorf("%s/%s: capabilities %+v, want drop [ALL] and no add", name, c.Name, s.Capabilities)
			}
			if s.SeccompProfile == nil || s.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("%s/%s: seccompProfile not RuntimeDefault", name, c.Name)
			}
			if s.Privileged != nil && *s.Privileged {
				t.Errorf("%s/%s: privileged", name, c.Name)
			}
		}
	}
}

// TestTopologySpread: by default the workers spread over zones and nodes,
// each constraint selecting the worker pods; a constraint from values gets
// the same selector.
func TestTopologySpread(t *testing.T) {
	d := deployment(t, render(t, baseArgs...), workerName)
	podLabels := d.Spec.Template.Labels
	keys := map[string]bool{}
	for _, c := range d.Spec.Template.Spec.TopologySpreadConstraints {
		keys[c.TopologyKey] = true
		if c.LabelSelector == nil || !selects(c.LabelSelector.MatchLabels, podLabels) {
			t.Errorf("constraint on %s does not select the worker pods: %+v", c.TopologyKey, c.LabelSelector)
		}
		if c.MaxSkew != 1 {
			t.Errorf("constraint on %s: maxSkew %d, want 1", c.TopologyKey, c.MaxSkew)
		}
	}
	for _, k := range []string{"topology.kubernetes.io/zone", "kubernetes.io/hostname"} {
		if !keys[k] {
			t.Errorf("no topology spread over %s; have %v", k, keys)
		}
	}

	d = deployment(t, render(t, append(baseArgs,
		"--set", "worker.topologySpreadConstraints[0].maxSkew=2",
		"--set", "worker.topologySpreadConstraints[0].topologyKey=example.com/rack",
		"--set", "worker.topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule")...), workerName)
	cs := d.Spec.Template.Spec.TopologySpreadConstraints
	if len(cs) != 1 || cs[0].TopologyKey != "example.com/rack" || cs[0].MaxSkew != 2 {
		t.Fatalf("constraints from values: got %+v", cs)
	}
	if cs[0].LabelSelector == nil || !selects(cs[0].LabelSelector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("a constraint from values did not get the worker selector: %+v", cs[0].LabelSelector)
	}
}

// TestPodDisruptionBudget: on by default, selecting the worker pods,
// letting a drain evict an unready worker; off when disabled.
func TestPodDisruptionBudget(t *testing.T) {
	objs := render(t, baseArgs...)
	p := pdb(t, objs, workerName)
	d := deployment(t, objs, workerName)
	if p.Spec.Selector == nil || !selects(p.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("PDB selector %+v does not select the worker pods %v", p.Spec.Selector, d.Spec.Template.Labels)
	}
	if p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntValue() != 1 || p.Spec.MinAvailable != nil {
		t.Errorf("PDB: maxUnavailable %v minAvailable %v, want maxUnavailable 1 only", p.Spec.MaxUnavailable, p.Spec.MinAvailable)
	}
	if p.Spec.UnhealthyPodEvictionPolicy == nil || *p.Spec.UnhealthyPodEvictionPolicy != "AlwaysAllow" {
		t.Errorf("unhealthyPodEvictionPolicy %v, want AlwaysAllow", p.Spec.UnhealthyPodEvictionPolicy)
	}

	p = pdb(t, render(t, append(baseArgs, "--set", "worker.podDisruptionBudget.maxUnavailable=null", "--set", "worker.podDisruptionBudget.minAvailable=2")...), workerName)
	if p.Spec.MinAvailable == nil || p.Spec.MinAvailable.IntValue() != 2 || p.Spec.MaxUnavailable != nil {
		t.Errorf("PDB: maxUnavailable %v minAvailable %v, want minAvailable 2 only", p.Spec.MaxUnavailable, p.Spec.MinAvailable)
	}

	if n := len(ofKind(render(t, append(baseArgs, "--set", "worker.podDisruptionBudget.enabled=false")...), "PodDisruptionBudget")); n != 0 {
		t.Errorf("disabled PDB still rendered %d", n)
	}
}

// The secrets of TestNoSecretInPlainValues: distinct, so that a leak names
// which one leaked.
const (
	redisPassword  = "redis-pw-0f1e2d3c4b5a"
	dashboardToken = "ui-token-9a8b7c6d5e4f3210"
)

var dashboardArgs = []string{"--set", "dashboard.enabled=true", "--set", "dashboard.auth.token=" + dashboardToken}

// TestNoSecretInPlainValues: a Redis URL and a dashboard token given as
// values land in Secrets only, reach the containers by secretKeyRef or a
// mounted Secret, and appear in no other object, in plain or in base64.
func TestNoSecretInPlainValues(t *testing.T) {
	url := "rediss://timerq-worker:" + redisPassword + "@redis.example:6380/0"
	objs := render(t, argv([]string{"--set", "redis.url=" + url, "--set", "redis.tls.enabled=true", "--set", "redis.tls.existingSecret=tls"}, dashboardArgs, apiOnlyArgs)...)
	for _, o := range objs {
		if o.Kind == "Secret" {
			continue
		}
		for _, s := range []string{redisPassword, dashboardToken} {
			if bytes.Contains(o.YAML, []byte(s)) || bytes.Contains(o.YAML, []byte(base64.StdEncoding.EncodeToString([]byte(s)))) {
				t.Errorf("%s/%s holds the secret %q", o.Kind, o.Name, s)
			}
		}
	}
	rs := secret(t, objs, "rel-timerq-redis")
	if string(rs.Data["url"]) != url {
		t.Errorf("chart-made Redis Secret holds %q under url, want the URL", rs.Data["url"])
	}
	us := secret(t, objs, "rel-timerq-dashboard")
	if string(us.Data["token"]) != dashboardToken {
		t.Errorf("chart-made dashboard Secret holds %q under token", us.Data["token"])
	}
	for _, name := range []string{workerName, dashboardName, apiName} {
		d := deployment(t, objs, name)
		for _, c := range d.Spec.Template.Spec.Containers {
			e, ok := envVar(c, "TIMERQ_REDIS_URL")
			if !ok || e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
				e.ValueFrom.SecretKeyRef.Name != "rel-timerq-redis" || e.ValueFrom.SecretKeyRef.Key != "url" {
				t.Errorf("%s/%s: TIMERQ_REDIS_URL = %+v, want it from Secret rel-timerq-redis key url", name, c.Name, e)
			}
			for _, e := range c.Env {
				if strings.Contains(e.Name, "TOKEN") && !strings.HasSuffix(e.Name, "_FILE") {
					t.Errorf("%s/%s: %s passes a token in the environment; mount it and pass the file", name, c.Name, e.Name)
				}
			}
		}
	}
}

// TestExistingSecrets: with existing Secrets named, the chart makes no
// Secret and the containers read the named ones.
func TestExistingSecrets(t *testing.T) {
	objs := render(t, "--set", "redis.existingSecret=my-redis", "--set", "redis.existingSecretKey=uri",
		"--set", "dashboard.enabled=true", "--set", "dashboard.auth.existingSecret=my-ui",
		"--set", "dashboard.redis.existingSecret=my-ui-redis")
	if s := ofKind(objs, "Secret"); len(s) != 0 {
		t.Errorf("rendered Secrets %v with existing ones given", names(s))
	}
	ref := func(name, cname string) *corev1.SecretKeySelector {
		e, _ := envVar(container(t, deployment(t, objs, name), cname), "TIMERQ_REDIS_URL")
		if e.ValueFrom == nil {
			return nil
		}
		return e.ValueFrom.SecretKeyRef
	}
	if r := ref(workerName, "timerworker"); r == nil || r.Name != "my-redis" || r.Key != "uri" {
		t.Errorf("worker's TIMERQ_REDIS_URL from %+v, want my-redis/uri", r)
	}
	if r := ref(dashboardName, "dashboard"); r == nil || r.Name != "my-ui-redis" || r.Key != "url" {
		t.Errorf("dashboard's TIMERQ_REDIS_URL from %+v, want my-ui-redis/url", r)
	}
	d := deployment(t, objs, dashboardName)
	found := false
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == "my-ui" {
			found = true
		}
	}
	if !found {
		t.Errorf("dashboard mounts no volume of Secret my-ui: %+v", d.Spec.Template.Spec.Volumes)
	}
}

// TestTLSFiles: with TLS on, the workers and the dashboard mount the TLS
// Secret read-only and point TIMERQ_TLS_* at files inside the mount that
// the Secret's keys name.
func TestTLSFiles(t *testing.T) {
	objs := render(t, argv(baseArgs, dashboardArgs, apiOnlyArgs, []string{
		"--set", "redis.tls.enabled=true", "--set", "redis.tls.existingSecret=redis-tls",
		"--set", "redis.tls.serverName=redis.internal"})...)
	for _, name := range []string{workerName, dashboardName, apiName} {
		d := deployment(t, objs, name)
		var tlsVol *corev1.Volume
		for i, v := range d.Spec.Template.Spec.Volumes {
			if v.Secret != nil && v.Secret.SecretName == "redis-tls" {
				tlsVol = &d.Spec.Template.Spec.Volumes[i]
			}
		}
		if tlsVol == nil {
			t.Fatalf("%s: no volume of Secret redis-tls", name)
		}
		c := d.Spec.Template.Spec.Containers[0]
		var mount *corev1.VolumeMount
		for i, m := range c.VolumeMounts {
			if m.Name == tlsVol.Name {
				mount = &c.VolumeMounts[i]
			}
		}
		if mount == nil || !mount.ReadOnly {
			t.Fatalf("%s: TLS volume not mounted read-only: %+v", name, mount)
		}
		want := map[string]string{
			"TIMERQ_TLS_CA_FILE":     filepath.Join(mount.MountPath, "ca.crt"),
			"TIMERQ_TLS_CERT_FILE":   filepath.Join(mount.MountPath, "tls.crt"),
			"TIMERQ_TLS_KEY_FILE":    filepath.Join(mount.MountPath, "tls.key"),
			"TIMERQ_TLS_SERVER_NAME": "redis.internal",
		}
		for k, v := range want {
			if e, ok := envVar(c, k); !ok || e.Value != v {
				t.Errorf("%s: %s = %q, want %q", name, k, e.Value, v)
			}
		}
	}

	// One-way TLS: no client certificate.
	c := container(t, deployment(t, render(t, append(baseArgs, "--set", "redis.tls.enabled=true", "--set", "redis.tls.existingSecret=redis-tls",
		"--set", "redis.tls.certKey=", "--set", "redis.tls.keyKey=")...), workerName), "timerworker")
	for _, k := range []string{"TIMERQ_TLS_CERT_FILE", "TIMERQ_TLS_KEY_FILE"} {
		if _, ok := envVar(c, k); ok {
			t.Errorf("one-way TLS still sets %s", k)
		}
	}
	if _, ok := envVar(c, "TIMERQ_TLS_CA_FILE"); !ok {
		t.Error("one-way TLS lost TIMERQ_TLS_CA_FILE")
	}

	// TLS off: no TLS variable, no volume.
	c = container(t, deployment(t, render(t, baseArgs...), workerName), "timerworker")
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "TIMERQ_TLS_") {
			t.Errorf("TLS off still sets %s", e.Name)
		}
	}
	if len(c.VolumeMounts) != 0 {
		t.Errorf("TLS off still mounts %+v", c.VolumeMounts)
	}
}

// TestOptionalObjects: the ServiceMonitor, PrometheusRule, Grafana
// ConfigMap and the dashboard appear only when enabled.
func TestOptionalObjects(t *testing.T) {
	optional := map[string]string{
		"serviceMonitor.enabled":   "ServiceMonitor/rel-timerq-worker",
		"prometheusRule.enabled":   "PrometheusRule/rel-timerq",
		"grafanaDashboard.enabled": "ConfigMap/rel-timerq-grafana-dashboard",
		"dashboard.enabled":        "Deployment/rel-timerq-dashboard",
		"api.enabled":              "Service/rel-timerq-api",
	}
	has := func(objs []object, kn string) bool {
		for _, n := range names(objs) {
			if n == kn {
				return true
			}
		}
		return false
	}
	def := render(t, baseArgs...)
	for _, kn := range optional {
		if has(def, kn) {
			t.Errorf("%s rendered by default", kn)
		}
	}
	if n := len(ofKind(def, "Service")); n != 1 {
		t.Errorf("by default want the metrics Service only, got %v", names(ofKind(def, "Service")))
	}
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule", "ConfigMap"} {
		if n := len(ofKind(def, kind)); n != 0 {
			t.Errorf("%d %s rendered by default", n, kind)
		}
	}
	if len(ofKind(def, "Deployment")) != 1 {
		t.Errorf("by default want the worker Deployment only, got %v", names(ofKind(def, "Deployment")))
	}
	for key, kn := range optional {
		args := append(append([]string{}, baseArgs...), "--set", key+"=true")
		if key == "dashboard.enabled" {
			args = append(args, dashboardArgs...)
		}
		if key == "api.enabled" {
			args = append(args, apiArgs...)
		}
		objs := render(t, args...)
		if !has(objs, kn) {
			t.Errorf("%s=true: no %s in %v", key, kn, names(objs))
		}
		if key == "dashboard.enabled" && !has(objs, "Service/rel-timerq-dashboard") {
			t.Errorf("dashboard enabled without its Service")
		}
	}
}

// TestServiceMonitor: it selects the metrics Service, scrapes its port by
// name, and honours timerq's own "namespace" label, which the alerts group
// by.
func TestServiceMonitor(t *testing.T) {
	objs := render(t, append(baseArgs, "--set", "serviceMonitor.enabled=true", "--set", "serviceMonitor.labels.release=prom")...)
	var sm struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			Endpoints []struct {
				Port        string `json:"port"`
				Path        string `json:"path"`
				HonorLabels bool   `json:"honorLabels"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(one(t, objs, "ServiceMonitor", workerName).YAML, &sm); err != nil {
		t.Fatal(err)
	}
	svc := service(t, objs, "rel-timerq-metrics")
	if !selects(sm.Spec.Selector.MatchLabels, svc.Labels) {
		t.Errorf("ServiceMonitor selector %v does not select Service labels %v", sm.Spec.Selector.MatchLabels, svc.Labels)
	}
	d := deployment(t, objs, workerName)
	if !selects(svc.Spec.Selector, d.Spec.Template.Labels) {
		t.Errorf("metrics Service selector %v does not select the worker pods", svc.Spec.Selector)
	}
	if !svc.Spec.PublishNotReadyAddresses {
		t.Error("metrics Service hides unready workers from Prometheus, when their metrics matter most")
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor endpoints %+v", sm.Spec.Endpoints)
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Port != svc.Spec.Ports[0].Name || ep.Path != "/metrics" || !ep.HonorLabels {
		t.Errorf("endpoint %+v: want port %q, path /metrics, honorLabels true", ep, svc.Spec.Ports[0].Name)
	}
	if sm.Metadata.Labels["release"] != "prom" {
		t.Errorf("serviceMonitor.labels not applied: %v", sm.Metadata.Labels)
	}

	// API-only replicas (api.claim=false) serve the API's request metrics:
	// the ServiceMonitor scrapes them through a metrics Service of theirs,
	// and no Service without a metrics port.
	objs = render(t, argv(baseArgs, apiOnlyArgs, dashboardArgs, []string{"--set", "serviceMonitor.enabled=true"})...)
	if err := yaml.Unmarshal(one(t, objs, "ServiceMonitor", workerName).YAML, &sm); err != nil {
		t.Fatal(err)
	}
	am := service(t, objs, "rel-timerq-api-metrics")
	if !selects(sm.Spec.Selector.MatchLabels, am.Labels) {
		t.Errorf("ServiceMonitor selector %v does not select the API metrics Service %v", sm.Spec.Selector.MatchLabels, am.Labels)
	}
	a := deployment(t, objs, apiName)
	if !selects(am.Spec.Selector, a.Spec.Template.Labels) || selects(am.Spec.Selector, deployment(t, objs, workerName).Spec.Template.Labels) {
		t.Errorf("API metrics Service selector %v: want the API pods only", am.Spec.Selector)
	}
	if len(am.Spec.Ports) != 1 || am.Spec.Ports[0].Name != "metrics" || containerPort(t, container(t, a, "api"), am.Spec.Ports[0].TargetPort.String()) != 9090 {
		t.Errorf("API metrics Service ports %+v, want metrics to the API pods' metrics port", am.Spec.Ports)
	}
	for _, name := range []string{apiName, dashboardName} {
		if svc := service(t, objs, name); selects(sm.Spec.Selector.MatchLabels, svc.Labels) {
			t.Errorf("ServiceMonitor selects Service %s, which has no metrics port", name)
		}
	}
}

// TestPrometheusRuleIsTheDeployRules: the chart's copy of the rules is
// deploy/prometheus/timerq-rules.yml byte for byte, and the rendered
// PrometheusRule's spec is that file's content, Prometheus templates
// untouched.
func TestPrometheusRuleIsTheDeployRules(t *testing.T) {
	src := readFile(t, filepath.Join(repoRoot, "deploy/prometheus/timerq-rules.yml"))
	copyPath := filepath.Join(chartDir, "files/timerq-rules.yml")
	if !bytes.Equal(readFile(t, copyPath), src) {
		t.Fatalf("%s differs from deploy/prometheus/timerq-rules.yml; copy it: cp deploy/prometheus/timerq-rules.yml deploy/helm/timerq/files/", copyPath)
	}
	objs := render(t, append(baseArgs, "--set", "prometheusRule.enabled=true")...)
	var rule struct {
		Spec any `json:"spec"`
	}
	if err := yaml.Unmarshal(one(t, objs, "PrometheusRule", "rel-timerq").YAML, &rule); err != nil {
		t.Fatal(err)
	}
	var want any
	if err := yaml.Unmarshal(src, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rule.Spec, want) {
		got, _ := json.MarshalIndent(rule.Spec, "", " ")
		t.Errorf("PrometheusRule spec is not deploy/prometheus/timerq-rules.yml:\n%s", got)
	}
	if !bytes.Contains(one(t, objs, "PrometheusRule", "rel-timerq").YAML, []byte("{{ $labels.namespace }}")) {
		t.Error("the rules' Prometheus templates did not survive rendering")
	}
}

// TestGrafanaDashboardIsTheDeployDashboard: the chart's copy is
// deploy/grafana/timerq.json byte for byte, and the ConfigMap carries it
// under the sidecar's label.
func TestGrafanaDashboardIsTheDeployDashboard(t *testing.T) {
	src := readFile(t, filepath.Join(repoRoot, "deploy/grafana/timerq.json"))
	copyPath := filepath.Join(chartDir, "files/timerq.json")
	if !bytes.Equal(readFile(t, copyPath), src) {
		t.Fatalf("%s differs from deploy/grafana/timerq.json; copy it: cp deploy/grafana/timerq.json deploy/helm/timerq/files/", copyPath)
	}
	objs := render(t, append(baseArgs, "--set", "grafanaDashboard.enabled=true", "--set", "grafanaDashboard.namespace=monitoring")...)
	var cm corev1.ConfigMap
	decode(t, one(t, objs, "ConfigMap", "rel-timerq-grafana-dashboard"), &cm)
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("ConfigMap labels %v lack grafana_dashboard: \"1\"", cm.Labels)
	}
	if cm.Namespace != "monitoring" {
		t.Errorf("ConfigMap namespace %q, want grafanaDashboard.namespace", cm.Namespace)
	}
	var got, want any
	if err := json.Unmarshal([]byte(cm.Data["timerq.json"]), &got); err != nil {
		t.Fatalf("ConfigMap's timerq.json is not JSON: %v", err)
	}
	if err := json.Unmarshal(src, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Error("ConfigMap's timerq.json is not deploy/grafana/timerq.json")
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRefusals: a render that could only deploy something broken fails,
// saying what to set.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no Redis", nil, "set redis.existingSecret"},
		{"both Redis sources", []string{"--set", "redis.existingSecret=a", "--set", "redis.url=redis://r:6379/0"}, "keep one"},
		{"TLS with redis://", []string{"--set", "redis.url=redis://r:6379/0", "--set", "redis.tls.enabled=true", "--set", "redis.tls.existingSecret=t"}, "needs a rediss:// URL"},
		{"TLS without its Secret", append(baseArgs, "--set", "redis.tls.enabled=true"), "redis.tls.existingSecret"},
		{"client cert without key", append(baseArgs, "--set", "redis.tls.enabled=true", "--set", "redis.tls.existingSecret=t", "--set", "redis.tls.keyKey="), "go together"},
		{"dashboard without auth", append(baseArgs, "--set", "dashboard.enabled=true"), "needs auth"},
		{"dashboard short token", append(baseArgs, "--set", "dashboard.enabled=true", "--set", "dashboard.auth.token=short"), "shorter than 16"},
		{"API without tokens", argv(baseArgs, []string{"--set", "api.enabled=true"}), "api.enabled needs api.tokens.existingSecret"},
		{"API without tokens, API-only", argv(baseArgs, []string{"--set", "api.enabled=true", "--set", "api.claim=false"}), "api.enabled needs api.tokens.existingSecret"},
		{"API on the metrics port", argv(baseArgs, apiArgs, []string{"--set", "api.port=9090"}), "same port"},
		{"API client CA without TLS", argv(baseArgs, apiArgs, []string{"--set", "api.tls.clientCAKey=ca.crt"}), "api.tls.existingSecret"},
		{"API PDB both ways", argv(baseArgs, apiOnlyArgs, []string{"--set", "api.podDisruptionBudget.minAvailable=1"}), "not both"},
		{"API negative rate", argv(baseArgs, apiArgs, []string{"--set", "api.rateLimit=-1"}), "rateLimit"},
		{"misspelt value", append(baseArgs, "--set", "worker.replica=2"), "'replica' not allowed"},
		{"bad timer namespace", append(baseArgs, "--set", "worker.namespaces={a b}"), "does not match pattern"},
		{"PDB both ways", append(baseArgs, "--set", "worker.podDisruptionBudget.minAvailable=1"), "not both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := helmTemplate(tc.args...)
			if err == nil {
				t.Fatalf("rendered; want a refusal containing %q", tc.want)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("refusal does not say %q:\n%s", tc.want, out)
			}
		})
	}
}

// TestLint: helm lint --strict passes on the values CI renders with.
func TestLint(t *testing.T) {
	for _, args := range [][]string{
		baseArgs,
		append(append([]string{}, baseArgs...), append(dashboardArgs, "--set", "serviceMonitor.enabled=true", "--set", "prometheusRule.enabled=true",
			"--set", "grafanaDashboard.enabled=true", "--set", "redis.tls.enabled=true", "--set", "redis.tls.existingSecret=t")...),
		argv(baseArgs, apiArgs, []string{"--set", "api.tls.existingSecret=api-tls", "--set", "api.rateLimit=20"}),
		argv(baseArgs, apiOnlyArgs, []string{"--set", "api.tls.existingSecret=api-tls", "--set", "api.tls.clientCAKey=ca.crt"}),
	} {
		cmd := execHelm(append([]string{"lint", "--strict", chartDir}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("helm lint --strict %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
