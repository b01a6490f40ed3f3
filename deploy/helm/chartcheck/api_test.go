package chartcheck

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// mountedSecret returns the Secret, and the key in it, of the file at path
// in c: the read-only mount whose directory holds path, and the Secret
// volume behind it. It fails the test when no such mount exists.
func mountedSecret(t *testing.T, d *appsv1.Deployment, c corev1.Container, path string) (secretName, key string) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if filepath.Dir(path) != m.MountPath {
			continue
		}
		if !m.ReadOnly {
			t.Errorf("%s/%s: %s is mounted writable", d.Name, c.Name, m.MountPath)
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				if v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o002 != 0 {
					t.Errorf("%s: volume %s lets others write its files; timerworker refuses such a tokens file", d.Name, v.Name)
				}
				return v.Secret.SecretName, filepath.Base(path)
			}
		}
	}
	t.Fatalf("%s/%s: no Secret mounted at %s (mounts %+v)", d.Name, c.Name, filepath.Dir(path), c.VolumeMounts)
	return "", ""
}

// checkAPIContainer checks that c serves the HTTP API on port (container
// port "api", TIMERQ_API_ADDR=:port) with the tokens file from Secret
// timerq-api-tokens, key "tokens".
func checkAPIContainer(t *testing.T, d *appsv1.Deployment, c corev1.Container, port int32) {
	t.Helper()
	if e, ok := envVar(c, "TIMERQ_API_ADDR"); !ok || e.Value != ":"+strconv.Itoa(int(port)) {
		t.Errorf("%s: TIMERQ_API_ADDR = %+v, want :%d", d.Name, e, port)
	}
	if got := containerPort(t, c, "api"); got != port {
		t.Errorf("%s: container port api is %d, want %d", d.Name, got, port)
	}
	e, ok := envVar(c, "TIMERQ_API_TOKENS_FILE")
	if !ok || e.ValueFrom != nil {
		t.Fatalf("%s: TIMERQ_API_TOKENS_FILE = %+v, want a path", d.Name, e)
	}
	if name, key := mountedSecret(t, d, c, e.Value); name != "timerq-api-tokens" || key != "tokens" {
		t.Errorf("%s: the tokens file is key %q of Secret %q, want tokens of timerq-api-tokens", d.Name, key, name)
	}
}

// TestAPIServedByWorkers: api.enabled with api.claim's default serves the
// API from the worker pods: its variables, port and tokens mount on the
// worker container, the API Service selecting the workers, and no
// Deployment of its own.
func TestAPIServedByWorkers(t *testing.T) {
	objs := render(t, argv(baseArgs, apiArgs, []string{"--set", "api.port=8088", "--set", "api.service.port=80"})...)
	w := deployment(t, objs, workerName)
	c := container(t, w, "timerworker")
	checkAPIContainer(t, w, c, 8088)
	if e, ok := envVar(c, "TIMERQ_CLAIM"); ok && e.Value != "true" {
		t.Errorf("workers serving the API stopped claiming: TIMERQ_CLAIM=%q", e.Value)
	}
	for _, name := range []string{"TIMERQ_API_RATE_LIMIT", "TIMERQ_API_TLS_CERT_FILE", "TIMERQ_API_TLS_KEY_FILE", "TIMERQ_API_TLS_CLIENT_CA_FILE"} {
		if _, ok := envVar(c, name); ok {
			t.Errorf("%s set though its value was not given", name)
		}
	}
	svc := service(t, objs, apiName)
	if !selects(svc.Spec.Selector, w.Spec.Template.Labels) {
		t.Errorf("API Service selector %v does not select the worker pods %v", svc.Spec.Selector, w.Spec.Template.Labels)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 80 || svc.Spec.Ports[0].TargetPort.String() != "api" {
		t.Errorf("API Service ports %+v, want 80 to the container port api", svc.Spec.Ports)
	}
	if n := len(ofKind(objs, "Deployment")); n != 1 {
		t.Errorf("want the worker Deployment only, got %v", names(ofKind(objs, "Deployment")))
	}
	if n := len(ofKind(objs, "PodDisruptionBudget")); n != 1 {
		t.Errorf("want the workers' PDB only, got %v", names(ofKind(objs, "PodDisruptionBudget")))
	}

	// Off: none of it.
	c = container(t, deployment(t, render(t, baseArgs...), workerName), "timerworker")
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "TIMERQ_API_") {
			t.Errorf("API off still sets %s", e.Name)
		}
	}
	for _, p := range c.Ports {
		if p.Name == "api" {
			t.Error("API off still declares the port api")
		}
	}
}

// TestAPIOnlyDeployment: api.claim=false gives the API a Deployment of
// API-only replicas (TIMERQ_CLAIM=false) with its own replicas, resources
// and PDB; the API Service selects them and not the workers, which keep
// claiming without the API.
func TestAPIOnlyDeployment(t *testing.T) {
	objs := render(t, argv(baseArgs, apiOnlyArgs, []string{"--set", "api.replicas=4", "--set", "api.resources.limits.memory=400Mi",
		"--set-json", "api.rateLimit=12.5", "--set", "worker.namespaces={a,b}"})...)
	a := deployment(t, objs, apiName)
	c := container(t, a, "api")
	checkAPIContainer(t, a, c, 8080)
	if e, ok := envVar(c, "TIMERQ_CLAIM"); !ok || e.Value != "false" {
		t.Errorf("API-only replicas: TIMERQ_CLAIM = %+v, want false", e)
	}
	if e, _ := envVar(c, "TIMERQ_API_RATE_LIMIT"); e.Value != "12.5" {
		t.Errorf("TIMERQ_API_RATE_LIMIT = %q, want 12.5", e.Value)
	}
	if e, _ := envVar(c, "TIMERQ_NAMESPACE"); e.Value != "a,b" {
		t.Errorf("API-only replicas: TIMERQ_NAMESPACE = %q, want the workers' a,b", e.Value)
	}
	if a.Spec.Replicas == nil || *a.Spec.Replicas != 4 {
		t.Errorf("API replicas %v, want 4", a.Spec.Replicas)
	}
	if got := c.Resources.Limits.Memory().String(); got != "400Mi" {
		t.Errorf("API memory limit %s, want 400Mi", got)
	}
	// Readiness: /readyz on the metrics port, which an API-only replica
	// answers once Redis does.
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || containerPort(t, c, p.HTTPGet.Port.String()) != 9090 {
		t.Errorf("API readiness %+v, want /readyz on the metrics port", p)
	}

	w := deployment(t, objs, workerName)
	wc := container(t, w, "timerworker")
	for _, e := range wc.Env {
		if strings.HasPrefix(e.Name, "TIMERQ_API_") || e.Name == "TIMERQ_CLAIM" {
			t.Errorf("workers set %s though the API-only replicas serve the API", e.Name)
		}
	}
	svc := service(t, objs, apiName)
	if !selects(svc.Spec.Selector, a.Spec.Template.Labels) || selects(svc.Spec.Selector, w.Spec.Template.Labels) {
		t.Errorf("API Service selector %v: want the API pods %v, not the workers %v", svc.Spec.Selector, a.Spec.Template.Labels, w.Spec.Template.Labels)
	}
	if selects(a.Spec.Selector.MatchLabels, w.Spec.Template.Labels) || selects(w.Spec.Selector.MatchLabels, a.Spec.Template.Labels) {
		t.Error("the worker and API Deployments select each other's pods")
	}
	p := pdb(t, objs, apiName)
	if p.Spec.Selector == nil || !selects(p.Spec.Selector.MatchLabels, a.Spec.Template.Labels) || selects(p.Spec.Selector.MatchLabels, w.Spec.Template.Labels) {
		t.Errorf("API PDB selector %+v: want the API pods only", p.Spec.Selector)
	}
	if p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntValue() != 1 || p.Spec.UnhealthyPodEvictionPolicy == nil || *p.Spec.UnhealthyPodEvictionPolicy != "AlwaysAllow" {
		t.Errorf("API PDB %+v: want maxUnavailable 1, AlwaysAllow", p.Spec)
	}
	if n := len(ofKind(render(t, argv(baseArgs, apiOnlyArgs, []string{"--set", "api.podDisruptionBudget.enabled=false"})...), "PodDisruptionBudget")); n != 1 {
		t.Errorf("api.podDisruptionBudget.enabled=false: want the workers' PDB only, got %d", n)
	}

	// Its own Redis user.
	objs = render(t, argv(baseArgs, apiOnlyArgs, []string{"--set", "api.redis.existingSecret=api-redis"})...)
	e, _ := envVar(container(t, deployment(t, objs, apiName), "api"), "TIMERQ_REDIS_URL")
	if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "api-redis" || e.ValueFrom.SecretKeyRef.Key != "url" {
		t.Errorf("api.redis.existingSecret: TIMERQ_REDIS_URL = %+v, want api-redis/url", e)
	}
}

// TestAPITLS: api.tls.existingSecret mounts that Secret read-only and
// points the TIMERQ_API_TLS_* files at its keys; with TLS, the Service
// port says https.
func TestAPITLS(t *testing.T) {
	for _, mode := range [][]string{apiArgs, apiOnlyArgs} {
		objs := render(t, argv(baseArgs, mode, []string{"--set", "api.tls.existingSecret=api-tls", "--set", "api.tls.clientCAKey=ca.crt"})...)
		name, cname := workerName, "timerworker"
		if mode[len(mode)-1] == "api.claim=false" {
			name, cname = apiName, "api"
		}
		d := deployment(t, objs, name)
		c := container(t, d, cname)
		for env, key := range map[string]string{
			"TIMERQ_API_TLS_CERT_FILE": "tls.crt", "TIMERQ_API_TLS_KEY_FILE": "tls.key", "TIMERQ_API_TLS_CLIENT_CA_FILE": "ca.crt",
		} {
			e, ok := envVar(c, env)
			if !ok {
				t.Errorf("%s: %s not set", name, env)
				continue
			}
			if s, k := mountedSecret(t, d, c, e.Value); s != "api-tls" || k != key {
				t.Errorf("%s: %s is key %q of Secret %q, want %s of api-tls", name, env, k, s, key)
			}
		}
		svc := service(t, objs, apiName)
		if ap := svc.Spec.Ports[0].AppProtocol; ap == nil || *ap != "https" {
			t.Errorf("%s: API Service appProtocol %v, want https", name, ap)
		}
	}
}
