package deliver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/deliver"
)

// receiverDir holds the Node receiver and its pinned packages.
const receiverDir = "testdata/receiver"

// requireNode returns the path of a tool the Node receiver needs, skipping
// the test without it unless TIMERQ_REQUIRE_NODE=1, as CI sets it.
func requireNode(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("TIMERQ_REQUIRE_NODE") == "1" {
		t.Fatalf("%s is not on PATH and TIMERQ_REQUIRE_NODE=1: install Node 20+ with npm, or unset TIMERQ_REQUIRE_NODE", name)
	}
	t.Skipf("%s is not on PATH (set TIMERQ_REQUIRE_NODE=1 to fail instead)", name)
	return ""
}

// startReceiver installs the receiver's pinned packages if node_modules is
// missing (CI's .ci/run runs npm ci first), starts it with one receiver
// per secret, and returns its base URL; it stops when the test ends.
func startReceiver(t *testing.T, secrets map[string]string) string {
	t.Helper()
	node, npm := requireNode(t, "node"), requireNode(t, "npm")
	if _, err := os.Stat(filepath.Join(receiverDir, "node_modules")); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = receiverDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", receiverDir, err, out)
		}
	}
	env, _ := json.Marshal(secrets)
	cmd := exec.Command(node, "receiver.mjs")
	cmd.Dir = receiverDir
	cmd.Env = append(os.Environ(), "RECEIVER_SECRETS="+string(env))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close() // the receiver exits when its stdin closes
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("receiver: %v\n%s", err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("the receiver did not exit within 30 s of its stdin closing")
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("receiver did not start: %v\n%s", err, stderr.String())
	}
	var hello struct{ Port int }
	if err := json.Unmarshal([]byte(line), &hello); err != nil || hello.Port == 0 {
		t.Fatalf("receiver said %q: %v", line, err)
	}
	go io.Copy(io.Discard, stdout) // until it exits
	return "http://127.0.0.1:" + strconv.Itoa(hello.Port)
}

// A receiver we did not write, the reference npm package standardwebhooks,
// verifies every request deliver.Sender makes: JSON, binary and empty
// bodies, later attempts, and a key rotation in three steps (old key only;
// old and new, when receivers that know either accept; new only). As
// controls, requests it must refuse are refused: signed with a key the
// receiver does not know, or after the rotation, with the old receiver.
func TestNodeReceiverVerifiesSignatures(t *testing.T) {
	oldText, newText, otherText := deliver.GenerateSecret(), deliver.GenerateSecret(), deliver.GenerateSecret()
	base := startReceiver(t, map[string]string{"old": oldText, "new": newText})
	parse := func(s string) deliver.Secret {
		sec, err := deliver.ParseSecret(s)
		if err != nil {
			t.Fatal(err)
		}
		return sec
	}
	oldKey, newKey, otherKey := parse(oldText), parse(newText), parse(otherText)
	snd := newSender(t, &deliver.Guard{Allow: loopback})

	payloads := map[string][]byte{
		"json":   []byte(`{"type":"invoice.due","data":{"id":"in_1","amount":4200,"note":"été ✓"}}`),
		"binary": {0x00, 0xff, 0xfe, '.', 0x80, '\n'},
		"empty":  {},
	}
	due := time.Now().Add(-time.Second).Truncate(time.Millisecond)
	var verified, refused int
	send := func(step, receiver string, secrets []deliver.Secret, kind string, attempt int, want int) {
		t.Helper()
		f := deliver.Fire{Namespace: "interop", TimerID: "timer." + step + "." + kind, Due: due, FiredAt: due,
			Payload: payloads[kind], Attempt: attempt}
		a := snd.Send(context.Background(), deliver.Endpoint{Name: receiver, URL: base + "/" + receiver, Secrets: secrets}, f)
		if a.Status != want {
			t.Errorf("%s: %s body, attempt %d, to the %q receiver: status %d (%s), want %d", step, kind, attempt, receiver, a.Status, a.Error, want)
		}
		if want == http.StatusNoContent {
			verified++
		} else {
			refused++
		}
	}
	for kind := range payloads {
		for attempt := 1; attempt <= 2; attempt++ {
			send("before", "old", []deliver.Secret{oldKey}, kind, attempt, 204)
			send("rotating", "old", []deliver.Secret{newKey, oldKey}, kind, attempt, 204)
			send("rotating", "new", []deliver.Secret{newKey, oldKey}, kind, attempt, 204)
			send("after", "new", []deliver.Secret{newKey}, kind, attempt, 204)
			// Controls: these must fail verification.
			send("after", "old", []deliver.Secret{newKey}, kind, attempt, 401)
			send("forged", "new", []deliver.Secret{otherKey}, kind, attempt, 401)
		}
	}

	resp, err := http.Get(base + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	defer http.DefaultClient.CloseIdleConnections()
	var stats struct{ Verified, Refused int }
	if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil {
		t.Fatal(err)
	}
	if stats.Verified != verified || stats.Refused != refused {
		t.Fatalf("the receiver verified %d and refused %d requests; want %d and %d", stats.Verified, stats.Refused, verified, refused)
	}
	t.Logf("standardwebhooks verified %d requests and refused the %d controls", verified, refused)
}

// docSnippet returns the fenced code block of language lang in
// docs/delivery.md that contains marker, as the page shows it.
func docSnippet(t *testing.T, lang, marker string) string {
	t.Helper()
	doc, err := os.ReadFile("../docs/delivery.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range strings.Split(string(doc), "\n```"+lang+"\n")[1:] {
		code, _, ok := strings.Cut(block, "\n```\n")
		if ok && strings.Contains(code, marker) {
			return code + "\n"
		}
	}
	t.Fatalf("docs/delivery.md has no ```%s block with %q", lang, marker)
	return ""
}

// The raw-bytes verifications that docs/delivery.md shows (Node with
// node:crypto, Python with its standard library), run as the page has
// them, verify requests that deliver.Sender signed: a JSON, an empty and
// a non-UTF-8 body (which standardwebhooks before 1.3.0 and svix 1.x
// cannot verify), with the receiver's key alone or beside another during
// a rotation. As controls, a request signed with another key and one whose
// body was altered are refused.
func TestDocsVerifyRawBytes(t *testing.T) {
	node := docSnippet(t, "js", "export function verifyWebhook(")
	python := docSnippet(t, "python", "def verify_webhook(")
	known, other := deliver.GenerateSecret(), deliver.GenerateSecret()
	parse := func(s string) deliver.Secret {
		sec, err := deliver.ParseSecret(s)
		if err != nil {
			t.Fatal(err)
		}
		return sec
	}
	knownKey, otherKey := parse(known), parse(other)

	// Requests as a receiver gets them, captured from the Sender.
	type request struct {
		Name    string            `json:"name"`
		Headers map[string]string `json:"headers"`
		Body    []byte            `json:"body"` // base64 in JSON
		Want    bool              `json:"-"`
	}
	s := newSink(t, nil)
	snd := newSender(t, &deliver.Guard{Allow: loopback})
	var reqs []request
	for kind, payload := range map[string][]byte{
		"json":   []byte(`{"type":"invoice.due","note":"été ✓"}`),
		"empty":  {},
		"binary": {0x00, 0xff, 0xfe, '.', 0x80, '\n', 0xc3},
	} {
		for _, c := range []struct {
			name    string
			secrets []deliver.Secret
			want    bool
		}{
			{"known", []deliver.Secret{knownKey}, true},
			{"rotating", []deliver.Secret{otherKey, knownKey}, true},
			{"forged", []deliver.Secret{otherKey}, false},
		} {
			f := fire("doc." + kind + "." + c.name)
			f.Payload = payload
			if a := snd.Send(context.Background(), deliver.Endpoint{URL: s.URL, Secrets: c.secrets}, f); a.Outcome != deliver.Delivered {
				t.Fatalf("%s %s: %+v", kind, c.name, a)
			}
			r, body := s.reqs[len(s.reqs)-1], s.body[len(s.body)-1]
			h := map[string]string{}
			for k := range r.Header {
				h[strings.ToLower(k)] = r.Header.Get(k)
			}
			reqs = append(reqs, request{Name: kind + " " + c.name, Headers: h, Body: body, Want: c.want})
			if c.name == "known" {
				altered := append([]byte{'x'}, body...)
				reqs = append(reqs, request{Name: kind + " altered", Headers: h, Body: altered, Want: false})
			}
		}
	}
	cases, err := json.Marshal(reqs)
	if err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, out []byte, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		var got []string
		if err := json.Unmarshal(out, &got); err != nil || len(got) != len(reqs) {
			t.Fatalf("the snippet's harness answered %q (%v); want %d results", out, err, len(reqs))
		}
		for i, r := range reqs {
			if (got[i] == "ok") != r.Want {
				t.Errorf("%s: %s; want verified=%v", r.Name, got[i], r.Want)
			}
		}
	}

	t.Run("node", func(t *testing.T) {
		nodeBin := requireNode(t, "node")
		dir := t.TempDir()
		harness := `import { verifyWebhook } from "./verify.mjs";
const { secret, requests } = JSON.parse(process.argv[2]);
console.log(JSON.stringify(requests.map((r) => {
  try { verifyWebhook(secret, r.headers, Buffer.from(r.body ?? "", "base64")); return "ok"; } catch (e) { return String(e.message); }
})));
`
		for name, text := range map[string]string{"verify.mjs": node, "main.mjs": harness} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		arg, _ := json.Marshal(map[string]any{"secret": known, "requests": json.RawMessage(cases)})
		out, err := exec.Command(nodeBin, filepath.Join(dir, "main.mjs"), string(arg)).CombinedOutput()
		check(t, out, err)
	})
	t.Run("python", func(t *testing.T) {
		py := requireNode(t, "python3")
		harness := python + `
import base64, json, sys
args = json.loads(sys.argv[1])
results = []
for r in args["requests"]:
    try:
        verify_webhook(args["secret"], r["headers"], base64.b64decode(r["body"] or ""))
        results.append("ok")
    except ValueError as e:
        results.append(str(e))
print(json.dumps(results))
`
		arg, _ := json.Marshal(map[string]any{"secret": known, "requests": json.RawMessage(cases)})
		out, err := exec.Command(py, "-c", harness, string(arg)).CombinedOutput()
		check(t, out, err)
	})
}
