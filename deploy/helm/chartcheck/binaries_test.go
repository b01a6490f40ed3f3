package chartcheck

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// The rendered containers must run the real binaries: these tests build
// timerworker and timerctl from the checkout the chart is in.

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
	buildOut  []byte
)

// binaries builds timerworker and timerctl once and returns their directory.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir = filepath.Join(tmpRoot, "bin")
		cmd := exec.Command("go", "build", "-o", binDir+"/", "./cmd/timerworker", "./cmd/timerctl")
		cmd.Dir = repoRoot
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("building timerworker and timerctl in %s: %v\n%s", repoRoot, buildErr, buildOut)
	}
	return binDir
}

// helpText is what a binary prints for --help.
func helpText(t *testing.T, args ...string) string {
	t.Helper()
	bin := filepath.Join(binaries(t), args[0])
	out, err := exec.Command(bin, args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestEnvNamesAreTheBinariesFlags: every TIMERQ_* variable the chart sets,
// in every configuration, is one that the binary's --help lists, so a
// renamed flag cannot leave the chart setting a variable nobody reads.
func TestEnvNamesAreTheBinariesFlags(t *testing.T) {
	worker := helpText(t, "timerworker", "--help")
	ctl := helpText(t, "timerctl", "--help") + helpText(t, "timerctl", "ui", "--help")
	every := []string{
		"--set", "redis.tls.enabled=true", "--set", "redis.tls.existingSecret=t", "--set", "redis.tls.serverName=r",
		"--set", "worker.batchSize=50", "--set", "worker.maxPollInterval=2s", "--set", "worker.retention=24h",
		"--set", "dashboard.prefix=/timerq",
		"--set", "api.tls.existingSecret=api-tls", "--set", "api.tls.clientCAKey=ca.crt", "--set", "api.rateLimit=5",
	}
	// The API on the workers, then on API-only replicas.
	objs := render(t, argv(baseArgs, dashboardArgs, apiArgs, every)...)
	apiOnly := render(t, argv(baseArgs, apiOnlyArgs, every)...)
	for _, d := range []struct {
		objs       []object
		name, help string
	}{{objs, workerName, worker}, {objs, dashboardName, ctl}, {apiOnly, apiName, worker}} {
		name, help := d.name, d.help
		c := deployment(t, d.objs, name).Spec.Template.Spec.Containers[0]
		if len(c.Env) < 5 {
			t.Fatalf("%s sets only %d variables", name, len(c.Env))
		}
		for _, e := range c.Env {
			if !strings.HasPrefix(e.Name, "TIMERQ_") {
				continue
			}
			// Whole words: TIMERQ_UI_TOKEN must not pass for being part
			// of TIMERQ_UI_TOKEN_FILE.
			if !regexp.MustCompile(`\b` + regexp.QuoteMeta(e.Name) + `\b`).MatchString(help) {
				t.Errorf("%s sets %s, which the binary's --help does not list", name, e.Name)
			}
		}
	}
	if !strings.Contains(worker, "/healthz") || !strings.Contains(worker, "/readyz") {
		t.Errorf("timerworker --help no longer names /healthz and /readyz:\n%s", worker)
	}
}

// TestRenderedContainersRun runs timerworker and `timerctl ui` with the
// environment the chart renders for them (the Secrets resolved, the
// mounted Secret files written to a directory), against timerworker's
// embedded Redis (TIMERQ_DEV, the one variable added here), and checks that
// the probes the chart declares answer 200 and that the dashboard asks for
// the token the chart mounted. The workers serve the HTTP API too
// (api.enabled), from the tokens Secret the chart mounts.
func TestRenderedContainersRun(t *testing.T) {
	bin := binaries(t)
	redisPort, metricsPort, uiPort, apiPort := freePort(t), freePort(t), freePort(t), freePort(t)
	objs := render(t, argv([]string{
		"--set", "redis.url=redis://127.0.0.1:" + redisPort + "/0",
		"--set", "worker.metricsPort=" + metricsPort,
		"--set", "worker.namespaces={chartcheck,other}",
		"--set", "dashboard.port=" + uiPort, "--set", "dashboard.namespace=chartcheck",
		"--set", "api.port=" + apiPort,
	}, dashboardArgs, apiArgs)...)
	token, tokens := apiTokens(t)

	w := deployment(t, objs, workerName)
	wc := container(t, w, "timerworker")
	start(t, filepath.Join(bin, "timerworker"), nil, append(podEnv(t, objs, tokens, w, wc), "TIMERQ_DEV=1"))
	for _, p := range []*corev1.Probe{wc.LivenessProbe, wc.ReadinessProbe} {
		url := "http://127.0.0.1:" + strconv.Itoa(int(containerPort(t, wc, p.HTTPGet.Port.String()))) + p.HTTPGet.Path
		waitStatus(t, url, "", http.StatusOK)
	}
	checkAPIServes(t, wc, token, nil)

	d := deployment(t, objs, dashboardName)
	dc := container(t, d, "dashboard")
	if len(dc.Command) != 1 || filepath.Base(dc.Command[0]) != "timerctl" {
		t.Fatalf("dashboard command %v, want the image's timerctl", dc.Command)
	}
	// Kubernetes probes and Services reach a pod at its own IP, so the
	// dashboard must listen on every address, not loopback.
	if e, _ := envVar(dc, "TIMERQ_UI_LISTEN"); e.Value != ":"+uiPort {
		t.Errorf("TIMERQ_UI_LISTEN = %q, want %q", e.Value, ":"+uiPort)
	}
	start(t, filepath.Join(bin, "timerctl"), dc.Args, podEnv(t, objs, nil, d, dc))
	port := strconv.Itoa(int(containerPort(t, dc, dc.ReadinessProbe.TCPSocket.Port.String())))
	waitStatus(t, "http://127.0.0.1:"+port+"/", "", http.StatusUnauthorized)
	waitStatus(t, "http://127.0.0.1:"+port+"/", dashboardToken, http.StatusOK)
}

// podEnv is c's environment as Kubernetes would give it: values as they
// are, secretKeyRefs from the rendered Secrets, and paths inside a mounted
// Secret moved to a directory holding that Secret's files.
//
// external holds the Secrets the chart names but does not make (an
// existingSecret): name -> key -> value.
func podEnv(t *testing.T, objs []object, external map[string]map[string][]byte, dep *appsv1.Deployment, c corev1.Container) []string {
	t.Helper()
	secretData := func(name string) map[string][]byte {
		if d, ok := external[name]; ok {
			return d
		}
		return secret(t, objs, name).Data
	}
	mounts := map[string]string{} // mount path -> local directory
	for _, m := range c.VolumeMounts {
		for _, v := range dep.Spec.Template.Spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			dir := t.TempDir()
			for k, val := range secretData(v.Secret.SecretName) {
				if err := os.WriteFile(filepath.Join(dir, k), val, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			mounts[m.MountPath] = dir
		}
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for _, e := range c.Env {
		val := e.Value
		if e.ValueFrom != nil {
			ref := e.ValueFrom.SecretKeyRef
			if ref == nil {
				t.Fatalf("%s: %s has a valueFrom other than a Secret", c.Name, e.Name)
			}
			val = string(secretData(ref.Name)[ref.Key])
		}
		for path, dir := range mounts {
			if rest, ok := strings.CutPrefix(val, path+"/"); ok {
				val = filepath.Join(dir, rest)
			}
		}
		env = append(env, e.Name+"="+val)
	}
	return env
}

// start runs bin until the test ends, then stops it with SIGTERM and
// waits for it.
func start(t *testing.T, bin string, args, env []string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), out.String())
		}
	})
	t.Cleanup(func() {
		select {
		case err := <-done:
			// It ended before the test did: put the result back for the
			// cleanup above, and say so.
			done <- err
			t.Errorf("%s exited early: %v", filepath.Base(bin), err)
		default:
		}
	})
}

// waitStatus polls url until it answers want, for up to 60 s.
func waitStatus(t *testing.T, url, token string, want int) {
	t.Helper()
	waitStatusClient(t, http.DefaultClient, url, token, want)
}

// waitStatusClient is waitStatus with client.
func waitStatusClient(t *testing.T, client *http.Client, url, token string, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	last := "no answer"
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == want {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("GET %s: want %d, last answer %s", url, want, last)
}

// freePort returns a port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// apiTokens mints a token with the built timerctl and returns it, and the
// tokens Secret the chart's apiArgs name, holding its line.
func apiTokens(t *testing.T) (string, map[string]map[string][]byte) {
	t.Helper()
	out, err := exec.Command(filepath.Join(binaries(t), "timerctl"), "-o", "json",
		"api-token", "create", "chartcheck", "--namespace", "*", "--rights", "read,write").CombinedOutput()
	if err != nil {
		t.Fatalf("timerctl api-token create: %v\n%s", err, out)
	}
	var tk struct{ Token, Line string }
	if err := json.Unmarshal(out, &tk); err != nil || tk.Token == "" || tk.Line == "" {
		t.Fatalf("timerctl api-token create -o json printed %q (%v)", out, err)
	}
	return tk.Token, map[string]map[string][]byte{"timerq-api-tokens": {"tokens": []byte(tk.Line + "\n")}}
}

// checkAPIServes checks that the process running container c serves the
// HTTP API on its port api, over HTTPS with a client that trusts roots if
// they are given: 401 without a token, 200 with the one minted.
func checkAPIServes(t *testing.T, c corev1.Container, token string, roots *x509.CertPool) {
	t.Helper()
	client, scheme := http.DefaultClient, "http"
	if roots != nil {
		client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
		defer client.CloseIdleConnections()
		scheme = "https"
	}
	url := scheme + "://127.0.0.1:" + strconv.Itoa(int(containerPort(t, c, "api"))) + "/v1/namespaces/chartcheck/timers"
	waitStatusClient(t, client, url, "", http.StatusUnauthorized)
	waitStatusClient(t, client, url, token, http.StatusOK)
}

// selfSigned returns a certificate for 127.0.0.1 and its key, both PEM,
// and a pool that trusts it.
func selfSigned(t *testing.T) (certPEM, keyPEM []byte, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "chartcheck"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), roots
}

// TestRenderedAPIOnlyRun runs the API-only replica api.claim=false renders
// beside a rendered worker (whose embedded Redis it uses): its probes
// answer 200 and it serves the API over HTTPS (api.tls) with the mounted
// tokens file and certificate.
func TestRenderedAPIOnlyRun(t *testing.T) {
	bin := binaries(t)
	redisPort, metricsPort := freePort(t), freePort(t)
	render1 := func(metricsPort, apiPort string) []object {
		return render(t, argv([]string{
			"--set", "redis.url=redis://127.0.0.1:" + redisPort + "/0",
			"--set", "worker.metricsPort=" + metricsPort, "--set", "worker.namespaces={chartcheck}",
			"--set", "api.port=" + apiPort, "--set", "api.tls.existingSecret=api-tls",
		}, apiOnlyArgs)...)
	}
	token, secrets := apiTokens(t)
	cert, key, roots := selfSigned(t)
	secrets["api-tls"] = map[string][]byte{"tls.crt": cert, "tls.key": key}

	objs := render1(metricsPort, freePort(t))
	w := deployment(t, objs, workerName)
	wc := container(t, w, "timerworker")
	start(t, filepath.Join(bin, "timerworker"), nil, append(podEnv(t, objs, secrets, w, wc), "TIMERQ_DEV=1"))
	waitStatus(t, "http://127.0.0.1:"+metricsPort+"/readyz", "", http.StatusOK)

	// The API replica's own ports: on a node it would have its own IP.
	objs = render1(freePort(t), freePort(t))
	a := deployment(t, objs, apiName)
	ac := container(t, a, "api")
	start(t, filepath.Join(bin, "timerworker"), nil, podEnv(t, objs, secrets, a, ac))
	for _, p := range []*corev1.Probe{ac.LivenessProbe, ac.ReadinessProbe} {
		url := "http://127.0.0.1:" + strconv.Itoa(int(containerPort(t, ac, p.HTTPGet.Port.String()))) + p.HTTPGet.Path
		waitStatus(t, url, "", http.StatusOK)
	}
	checkAPIServes(t, ac, token, roots)
}
