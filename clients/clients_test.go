package clients_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/timerq/timerq/deliver"
	"github.com/timerq/timerq/internal/workertest"
)

func TestMain(m *testing.M) { workertest.Main(m) }

// The package directories.
const (
	tsDir = "typescript"
	pyDir = "python"
)

var (
	npmOnce sync.Once
	npmErr  error
	tsOnce  sync.Once
	tsErr   error
)

// npmInstall installs the TypeScript package's pinned packages if
// node_modules is missing (CI's .ci/run runs npm ci first). It runs once
// per test binary, and returns npm's path.
func npmInstall(t *testing.T) string {
	t.Helper()
	npm := workertest.RequireTool(t, "npm")
	workertest.RequireTool(t, "node")
	npmOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(tsDir, "node_modules")); err != nil {
			_, npmErr = workertest.RunErr(5*time.Minute, tsDir, os.Environ(), npm, "ci", "--no-audit", "--no-fund")
		}
	})
	if npmErr != nil {
		t.Fatal(npmErr)
	}
	return npm
}

// buildTypeScript compiles the package (dist/) and its tests (out/) with
// tsc, once per test binary: a field of api/openapi.json that the client
// or a test uses and the committed types lost fails here.
func buildTypeScript(t *testing.T) string {
	t.Helper()
	npm := npmInstall(t)
	tsOnce.Do(func() {
		_, tsErr = workertest.RunErr(5*time.Minute, tsDir, os.Environ(), npm, "run", "-s", "build")
	})
	if tsErr != nil {
		t.Fatal(tsErr)
	}
	return npm
}

// vector is one delivery for the webhook verifiers: signed by deliver.Sign
// and judged by deliver.Verify. The packages' tests read them from the
// file TIMERQ_WEBHOOK_VECTORS names (typescript/test/webhook.test.ts,
// python/tests/test_webhook.py).
type vector struct {
	Name    string            `json:"name"`
	Secrets []string          `json:"secrets"` // the receiver's
	Headers map[string]string `json:"headers"`
	Body    []byte            `json:"body"` // base64 in JSON
	Valid   bool              `json:"valid"`
	UTF8    bool              `json:"utf8"`
}

// secretOf is a secret with a key of n bytes, seed and counting up.
func secretOf(t *testing.T, n int, seed byte) deliver.Secret {
	key := make([]byte, n)
	for i := range key {
		key[i] = seed + byte(i)*7
	}
	s, err := deliver.ParseSecret(deliver.SecretPrefix + base64.StdEncoding.EncodeToString(key))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// writeVectors writes deliver.Sign's test vectors, with timestamps from
// now, to a file of the test's own and returns its path. Each vector's
// verdict is deliver.Verify's, and must be the one meant.
func writeVectors(t *testing.T) string {
	t.Helper()
	k1, k2 := secretOf(t, deliver.GeneratedSecretBytes, 1), secretOf(t, deliver.GeneratedSecretBytes, 101)
	short, long := secretOf(t, deliver.MinSecretBytes, 50), secretOf(t, deliver.MaxSecretBytes, 200)
	now := time.Now()
	id := deliver.MessageID("orders", "order/42", now.Add(-time.Second))
	jsonBody := []byte(`{"order":42,"note":"é ✓"}`)
	var cases []vector
	add := func(name string, want bool, signers, receiver []deliver.Secret, at time.Time, body []byte, tamper func(h map[string]string) []byte) {
		h := map[string]string{
			deliver.HeaderID:        id,
			deliver.HeaderTimestamp: strconv.FormatInt(at.Unix(), 10),
			deliver.HeaderSignature: deliver.Sign(id, at, body, signers...),
		}
		if tamper != nil {
			body = tamper(h)
		}
		hh := http.Header{}
		for k, v := range h {
			hh.Set(k, v)
		}
		got := deliver.Verify(hh, body, now, receiver...) == nil
		if got != want {
			t.Fatalf("vector %q: deliver.Verify says valid=%v, meant %v", name, got, want)
		}
		v := vector{Name: name, Headers: h, Body: append([]byte{}, body...), Valid: got, UTF8: utf8.Valid(body)}
		for _, s := range receiver {
			v.Secrets = append(v.Secrets, s.Text())
		}
		cases = append(cases, v)
	}
	one, both := []deliver.Secret{k1}, []deliver.Secret{k1, k2}
	add("a JSON body", true, one, one, now, jsonBody, nil)
	add("an empty body", true, one, one, now, nil, nil)
	add("a body that is not UTF-8", true, one, one, now, []byte{0xff, 0xfe, 0x00, 0x80, 'x'}, nil)
	add("a text body that is not JSON", true, one, one, now, []byte("hello ✓"), nil)
	add("a 24-byte key", true, []deliver.Secret{short}, []deliver.Secret{short}, now, jsonBody, nil)
	add("a 64-byte key", true, []deliver.Secret{long}, []deliver.Secret{long}, now, jsonBody, nil)
	add("a rotation: the receiver knows the old key", true, both, one, now, jsonBody, nil)
	add("a rotation: the receiver knows the new key", true, both, []deliver.Secret{k2}, now, jsonBody, nil)
	add("a receiver that knows both keys, signed by the new", true, []deliver.Secret{k2}, both, now, jsonBody, nil)
	add("4 minutes old", true, one, one, now.Add(-4*time.Minute), jsonBody, nil)
	add("4 minutes ahead", true, one, one, now.Add(4*time.Minute), jsonBody, nil)
	add("after the rotation, the receiver knows only the old key", false, []deliver.Secret{k2}, one, now, jsonBody, nil)
	add("a tampered body", false, one, one, now, jsonBody, func(map[string]string) []byte {
		return bytes.Replace(jsonBody, []byte("42"), []byte("43"), 1)
	})
	add("a tampered non-UTF-8 body", false, one, one, now, []byte{0xff, 0xfe}, func(map[string]string) []byte { return []byte{0xff, 0xff} })
	add("a tampered webhook-id", false, one, one, now, jsonBody, func(h map[string]string) []byte {
		h[deliver.HeaderID] += "x"
		return jsonBody
	})
	add("a tampered webhook-timestamp", false, one, one, now, jsonBody, func(h map[string]string) []byte {
		h[deliver.HeaderTimestamp] = strconv.FormatInt(now.Unix()+1, 10)
		return jsonBody
	})
	add("a stale timestamp, 10 minutes old", false, one, one, now.Add(-10*time.Minute), jsonBody, nil)
	add("a timestamp 10 minutes ahead", false, one, one, now.Add(10*time.Minute), jsonBody, nil)
	add("a timestamp that is not a number", false, one, one, now, jsonBody, func(h map[string]string) []byte {
		h[deliver.HeaderTimestamp] = "soon"
		return jsonBody
	})
	add("no webhook-signature", false, one, one, now, jsonBody, func(h map[string]string) []byte {
		delete(h, deliver.HeaderSignature)
		return jsonBody
	})
	add("no webhook-id", false, one, one, now, jsonBody, func(h map[string]string) []byte {
		delete(h, deliver.HeaderID)
		return jsonBody
	})
	add("a v2 signature only", false, one, one, now, jsonBody, func(h map[string]string) []byte {
		h[deliver.HeaderSignature] = "v2," + strings.TrimPrefix(h[deliver.HeaderSignature], "v1,")
		return jsonBody
	})
	add("a signature cut short", false, one, one, now, jsonBody, func(h map[string]string) []byte {
		h[deliver.HeaderSignature] = h[deliver.HeaderSignature][:20]
		return jsonBody
	})
	raw, err := json.MarshalIndent(map[string]any{"cases": cases}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "webhook-vectors.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// nodeSummary is node --test's closing counts.
var nodeSummary = regexp.MustCompile(`(?m)^ℹ (tests|pass|fail|skipped) (\d+)$`)

// TestTypeScriptClient runs npm test in typescript/ (node --test on the
// compiled tests) against a real timerworker on standalone Redis,
// Sentinel and a 16-shard Cluster namespace: the package's client, every
// route of api/openapi.json through its raw client, and verifyWebhook
// against standardwebhooks, svix and deliver.Sign's vectors. A test that
// skipped fails it: every one must run here.
func TestTypeScriptClient(t *testing.T) {
	npm := buildTypeScript(t)
	workertest.ForEachBackend(t, true, func(t *testing.T, b workertest.Backend) {
		a := workertest.StartWorker(t, b)
		env := append(a.Env(b), "TIMERQ_WEBHOOK_VECTORS="+writeVectors(t))
		out := workertest.Run(t, 3*time.Minute, tsDir, env, npm, "test", "--silent")
		counts := map[string]int{}
		for _, m := range nodeSummary.FindAllStringSubmatch(out, -1) {
			counts[m[1]], _ = strconv.Atoi(m[2])
		}
		if counts["tests"] < 20 || counts["pass"] != counts["tests"] || counts["fail"] != 0 || counts["skipped"] != 0 {
			t.Fatalf("node --test: want every test run and passed, none skipped; counts %v:\n%s", counts, out)
		}
		t.Logf("node --test:\n%s", out)
	})
}

// TestTypeScriptGeneratedIsCurrent runs the package's generate script
// (openapi-typescript on api/openapi.json) into a temporary file and
// fails unless it is byte for byte the committed gen/timerq.d.ts: a
// contract changed without `npm run generate` in clients/typescript.
func TestTypeScriptGeneratedIsCurrent(t *testing.T) {
	npmInstall(t)
	var pkg struct {
		Scripts map[string]string `json:"scripts"`
	}
	raw, err := os.ReadFile(filepath.Join(tsDir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		t.Fatalf("%s/package.json: %v", tsDir, err)
	}
	const out = " -o gen/timerq.d.ts"
	script := pkg.Scripts["generate"]
	if !strings.HasSuffix(script, out) {
		t.Fatalf("%s/package.json's generate script %q does not end %q: this test writes elsewhere by replacing it", tsDir, script, out)
	}
	tmp := filepath.Join(t.TempDir(), "timerq.d.ts")
	abs, err := filepath.Abs(filepath.Join(tsDir, "node_modules", ".bin"))
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+abs+string(os.PathListSeparator)+os.Getenv("PATH"))
	workertest.Run(t, 2*time.Minute, tsDir, env, "sh", "-c", strings.TrimSuffix(script, out)+" -o "+tmp)
	want, err := os.ReadFile(tmp)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(tsDir, "gen", "timerq.d.ts"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("clients/typescript/gen/timerq.d.ts is not what api/openapi.json generates now (%d bytes, want %d): run `npm run generate` in clients/typescript and commit it", len(got), len(want))
	}
}

// TestTypeScriptPackageInstalls packs the package as npm publishes it
// (npm pack: package.json's files and exports), installs the tarball into
// an empty project as a user would, type-checks a user's file against the
// installed types (the generated ones among them, with neither Node's
// types nor skipLibCheck), and runs a user's import of it with node.
func TestTypeScriptPackageInstalls(t *testing.T) {
	npm := buildTypeScript(t)
	node := workertest.RequireTool(t, "node")
	dir := t.TempDir()
	out := workertest.Run(t, 2*time.Minute, tsDir, os.Environ(), npm, "pack", "--ignore-scripts", "--pack-destination", dir)
	lines := strings.Fields(out)
	tgz := filepath.Join(dir, lines[len(lines)-1])
	if !strings.HasSuffix(tgz, ".tgz") {
		t.Fatalf("npm pack printed %q, not the tarball's name", out)
	}
	files := map[string]string{
		"package.json": `{"name": "a-user", "private": true, "type": "module"}`,
		"tsconfig.json": `{"compilerOptions": {"target": "ES2022", "lib": ["ES2022", "DOM"], "types": [], "module": "NodeNext",
			"moduleResolution": "NodeNext", "strict": true, "noEmit": true}, "files": ["user.ts"]}`,
		"user.ts": `import { StaleEpochError, Timerq, TimerqError, verifyWebhook, type OwnerState, type Timer, type components } from "@timerq/client";
const tq = new Timerq({ baseUrl: "http://127.0.0.1:1", namespace: "orders" });
export const schedule = (): Promise<Timer> => tq.schedule({ id: "order-42", in: "15m", payload_text: "x" });
export const raw = () => tq.raw.GET("/v1/namespaces/{ns}/timers/{id}", { params: { path: { ns: "orders", id: "order-42" } } });
export type Fire = components["schemas"]["FireEvent"];
export const isProblem = (e: unknown): string | undefined => (e instanceof TimerqError ? e.type : undefined);
export const owner = (): Promise<OwnerState> => tq.getOwner("wf/7");
export const isStale = (e: unknown): boolean => e instanceof StaleEpochError;
export const verify = (h: Headers, body: Uint8Array): string => verifyWebhook("whsec_AAAA", h, body).id;
`,
		"user.mjs": `import { createHmac } from "node:crypto";
import { Timerq, verifyWebhook, version } from "@timerq/client";
const key = Buffer.alloc(32, 7);
const ts = String(Math.floor(Date.now() / 1000));
const sig = "v1," + createHmac("sha256", key).update("msg_1." + ts + ".{}").digest("base64");
const { id } = verifyWebhook("whsec_" + key.toString("base64"), { "webhook-id": "msg_1", "webhook-timestamp": ts, "webhook-signature": sig }, "{}");
new Timerq({ baseUrl: "http://127.0.0.1:1", namespace: "orders" });
console.log("installed", version, id);
`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The package's dependencies are in npm's cache once npm ci ran in
	// clients/typescript.
	workertest.Run(t, 2*time.Minute, dir, os.Environ(), npm, "install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error", tgz)
	tsc, err := filepath.Abs(filepath.Join(tsDir, "node_modules", ".bin", "tsc"))
	if err != nil {
		t.Fatal(err)
	}
	workertest.Run(t, 2*time.Minute, dir, os.Environ(), tsc, "-p", ".")
	if got := workertest.Run(t, time.Minute, dir, os.Environ(), node, "user.mjs"); !strings.HasPrefix(got, "installed ") || !strings.Contains(got, " msg_1") {
		t.Fatalf("a user's import of the installed package printed %q", got)
	}
}

// TestTypeScriptClientCoversEveryRoute: every operation of api/openapi.json
// is called through the package's raw client in typescript/test, so a
// route added to the contract is not done until the TypeScript tests
// exercise it. It needs no Node.
func TestTypeScriptClientCoversEveryRoute(t *testing.T) {
	raw, err := os.ReadFile("../api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("api/openapi.json: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(tsDir, "test", "*.ts"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no TypeScript tests in %s/test: %v", tsDir, err)
	}
	var src strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	n := 0
	for path, ops := range doc.Paths {
		for method := range ops {
			m := strings.ToUpper(method)
			switch m {
			case "GET", "PUT", "POST", "DELETE", "PATCH", "HEAD":
			default:
				continue // parameters, summary, …
			}
			n++
			// openapi-fetch's call: client.POST("/v1/…", …).
			if !regexp.MustCompile(`\.` + m + `\(\s*"` + regexp.QuoteMeta(path) + `"`).MatchString(src.String()) {
				t.Errorf("%s %s is in api/openapi.json but no test in %s/test calls it through the raw client (.%s(%q, …))", m, path, tsDir, m, path)
			}
		}
	}
	if n < 19 {
		t.Fatalf("found %d operations in api/openapi.json, want at least the 19 of docs/api.md", n)
	}
}

// pySummary is unittest's closing line: "OK", "OK (skipped=1)", "FAILED (...)".
var pySummary = regexp.MustCompile(`(?m)^Ran (\d+) tests? in .*\n\n(OK|FAILED)(.*)$`)

// TestPythonClient runs the Python package's unittest suite
// (python3 -m unittest, with src/ on PYTHONPATH, as an installed package
// is found) against a real timerworker on standalone Redis and a 16-shard
// Cluster namespace, with deliver.Sign's vectors for verify_webhook. A
// test that skipped fails it.
func TestPythonClient(t *testing.T) {
	python := workertest.RequireTool(t, "python3")
	workertest.ForEachBackend(t, false, func(t *testing.T, b workertest.Backend) {
		a := workertest.StartWorker(t, b)
		env := append(a.Env(b), "TIMERQ_WEBHOOK_VECTORS="+writeVectors(t), "PYTHONPATH=src", "PYTHONDONTWRITEBYTECODE=1")
		// -B: no __pycache__ in the tree.
		out := workertest.Run(t, 3*time.Minute, pyDir, env, python, "-B", "-m", "unittest", "discover", "-v", "-s", "tests", "-t", ".")
		m := pySummary.FindStringSubmatch(out)
		if m == nil || m[2] != "OK" || m[3] != "" {
			t.Fatalf("python3 -m unittest: want OK with nothing skipped:\n%s", out)
		}
		if n, _ := strconv.Atoi(m[1]); n < 10 {
			t.Fatalf("python3 -m unittest ran %s tests, want the package's 10 or more:\n%s", m[1], out)
		}
		t.Logf("python3 -m unittest:\n%s", out)
	})
}

// TestPackagesVersioned: each package says its version in one place a
// user's installer reads (package.json, pyproject.toml), and the code
// reports the same (the packages' own tests compare the two).
func TestPackagesVersioned(t *testing.T) {
	var pkg struct {
		Name, Version string
	}
	raw, err := os.ReadFile(filepath.Join(tsDir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		t.Fatal(err)
	}
	semver := regexp.MustCompile(`^\d+\.\d+\.\d+$`)
	if pkg.Name != "@timerq/client" || !semver.MatchString(pkg.Version) {
		t.Errorf("%s/package.json: name %q version %q, want @timerq/client and a version x.y.z", tsDir, pkg.Name, pkg.Version)
	}
	py, err := os.ReadFile(filepath.Join(pyDir, "pyproject.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^version = "(\d+\.\d+\.\d+)"$`).FindSubmatch(py); m == nil {
		t.Errorf("%s/pyproject.toml has no version = \"x.y.z\" line", pyDir)
	}
	for _, f := range []string{filepath.Join(tsDir, "README.md"), filepath.Join(pyDir, "README.md")} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s: a package needs a README: %v", f, err)
		}
	}
}
