package httpexamples

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/api/apitoken"
	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/internal/workertest"
)

// docExample is one curl command of a doc's code block, and the status
// the doc says it answers: the "# NNN" comment right after it, else any 2xx.
type docExample struct {
	cmd  string
	want int // 0: any 2xx
}

// docBlock is a fenced code block of a doc that runs curl: its text, to
// run with bash, and its curl commands in order.
type docBlock struct {
	file, text string
	examples   []docExample
}

var wantStatus = regexp.MustCompile(`^# (\d{3})\b`)

// readCurlBlocks returns the fenced blocks of file that run curl. A
// command goes on over lines ending in `\` and while a single quote is
// open (a JSON body over several lines). A "$ " prompt is dropped.
func readCurlBlocks(t *testing.T, file string) []docBlock {
	t.Helper()
	doc, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []docBlock
	var cur *docBlock
	var open *docExample // the command being read, until it ends
	var last *docExample // the command just read, until another line
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "```") {
			if cur == nil {
				cur = &docBlock{file: file}
			} else {
				if len(cur.examples) > 0 {
					out = append(out, *cur)
				}
				cur, open, last = nil, nil, nil
			}
			continue
		}
		if cur == nil {
			continue
		}
		line = strings.TrimPrefix(line, "$ ")
		cur.text += line + "\n"
		if open != nil {
			open.cmd += "\n" + line
		} else if strings.HasPrefix(strings.TrimSpace(line), "curl ") {
			cur.examples = append(cur.examples, docExample{cmd: line})
			open = &cur.examples[len(cur.examples)-1]
		} else {
			if m := wantStatus.FindStringSubmatch(line); m != nil && last != nil {
				last.want, _ = strconv.Atoi(m[1])
			}
			last = nil
			continue
		}
		if !strings.HasSuffix(open.cmd, `\`) && strings.Count(open.cmd, "'")%2 == 0 {
			last, open = open, nil
		}
	}
	return out
}

// curlWrapper replaces curl in a block run by the test: each call saves
// its body and appends its status to files in $DOCS_OUT. A stream (-N) is
// cut after 2 s; curl still reports its status then.
const curlWrapper = `n=0
curl() {
	n=$((n+1))
	local most=60
	case " $* " in *" -N "*|*" -sN "*) most=2 ;; esac
	command curl --max-time "$most" -o "$DOCS_OUT/body.$n" -w '%{http_code}\n' "$@" >>"$DOCS_OUT/status" || true
}
`

// runBlock runs b with bash, with the docs' server address (8080 on
// loopback) replaced by url and each of replace's keys by its value, and
// checks each curl command's status against what the doc says.
func runBlock(t *testing.T, bash string, b docBlock, url string, env []string, replace map[string]string) {
	t.Helper()
	text := b.text
	for _, host := range []string{"http://localhost:8080", "http://127.0.0.1:8080"} {
		text = strings.ReplaceAll(text, host, url)
	}
	for k, v := range replace {
		text = strings.ReplaceAll(text, k, v)
	}
	dir := t.TempDir()
	env = append(env, "DOCS_OUT="+dir)
	out, err := workertest.RunErr(2*time.Minute, ".", env, bash, "-c", curlWrapper+text)
	if err != nil {
		t.Fatalf("%s: the block\n%s\nfailed: %v", b.file, b.text, err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "status"))
	got := strings.Fields(string(raw))
	if len(got) != len(b.examples) {
		t.Fatalf("%s: the block ran curl %d times, want %d (one per command):\n%s\n%s", b.file, len(got), len(b.examples), b.text, out)
	}
	for i, ex := range b.examples {
		code, _ := strconv.Atoi(got[i])
		ok := code == ex.want || ex.want == 0 && code >= 200 && code < 300
		if !ok {
			body, _ := os.ReadFile(filepath.Join(dir, "body."+strconv.Itoa(i+1)))
			want := "a 2xx"
			if ex.want != 0 {
				want = strconv.Itoa(ex.want)
			}
			t.Errorf("%s: %s\nanswered %d %.400s; the doc says %s", b.file, ex.cmd, code, body, want)
		}
	}
}

// routeMention is a route a doc names in running text: `GET /v1/…`, or
// `POST …/timers/{id}/cancel` under a namespace.
var routeMention = regexp.MustCompile("`(GET|HEAD|POST|PUT|DELETE|PATCH) ((?:/v1/|…/|\\.\\.\\./)[^`\\s]*)`")

// TestDocsHTTPExamples keeps the HTTP examples of docs/api.md and
// docs/security.md true, against a real timerworker: every curl command
// of their code blocks runs, with bash, in order, and answers the status
// the doc gives after it ("# 403 …"), else a 2xx; and every route any doc
// names (`GET /v1/namespaces/{ns}/timers`, `PUT …/endpoints/NAME`) is one
// the server has, not its 404 "no route" or a 405. api.md's tour runs on
// a loopback server without tokens, as the doc starts it; security.md's
// examples on one with the tokens file, holding the token the doc mints.
func TestDocsHTTPExamples(t *testing.T) {
	bash := workertest.RequireTool(t, "bash")
	workertest.RequireTool(t, "curl")
	redistest.Require(t)
	s := redistest.Start(t, redistest.Config{})

	t.Run("api.md", func(t *testing.T) {
		b := workertest.Backend{Name: "standalone", URL: s.URL(), NS: "orders", Shards: 16}
		workertest.CreateNamespace(t, s.Client(t), b)
		a := workertest.Serve(t, b)
		blocks := readCurlBlocks(t, "../../docs/api.md")
		if len(blocks) < 2 {
			t.Fatalf("docs/api.md has %d blocks that run curl, want the tour and the endpoint's", len(blocks))
		}
		env := append(os.Environ(), "API="+a.URL+"/v1/namespaces/orders")
		for _, blk := range blocks {
			runBlock(t, bash, blk, a.URL, env, nil)
		}
	})

	t.Run("security.md", func(t *testing.T) {
		b := workertest.Backend{Name: "standalone", URL: s.URL(), NS: "billing", Shards: 1}
		workertest.CreateNamespace(t, s.Client(t), b)
		// The token security.md mints, with the rights it gives.
		token, line, err := apitoken.Mint("billing-svc", []string{"billing", "billing-*"}, []apitoken.Right{apitoken.Read, apitoken.Write})
		if err != nil {
			t.Fatal(err)
		}
		a := workertest.Serve(t, b, line.Line())
		blocks := readCurlBlocks(t, "../../docs/security.md")
		if len(blocks) == 0 {
			t.Fatal("docs/security.md has no block that runs curl")
		}
		doc, _ := os.ReadFile("../../docs/security.md")
		minted := regexp.MustCompile(`tq_[A-Za-z0-9_-]{43}`).FindString(string(doc))
		if minted == "" {
			t.Fatal("docs/security.md mints no token (tq_ and 43 characters)")
		}
		for _, blk := range blocks {
			runBlock(t, bash, blk, a.URL, os.Environ(), map[string]string{minted: token})
		}
	})

	t.Run("routes", func(t *testing.T) {
		b := workertest.Backend{Name: "standalone", URL: s.URL(), NS: "docs-routes", Shards: 1}
		workertest.CreateNamespace(t, s.Client(t), b)
		a := workertest.Serve(t, b)
		files, _ := filepath.Glob("../../docs/*.md")
		files = append(files, "../../README.md")
		seen := map[string]bool{}
		for _, f := range files {
			doc, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range routeMention.FindAllStringSubmatch(string(doc), -1) {
				method, p := m[1], m[2]
				if seen[method+" "+p] {
					continue
				}
				seen[method+" "+p] = true
				if rest, ok := strings.CutPrefix(p, "…/"); ok {
					p = "/v1/namespaces/{ns}/" + rest
				} else if rest, ok := strings.CutPrefix(p, ".../"); ok {
					p = "/v1/namespaces/{ns}/" + rest
				}
				path, query, _ := strings.Cut(p, "?")
				segs := strings.Split(path, "/")
				for i, seg := range segs {
					switch {
					case seg == "{ns}" || seg == "NS":
						segs[i] = b.NS
					case strings.HasPrefix(seg, "{") || seg != "" && strings.ToUpper(seg) == seg && strings.Trim(seg, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") == "":
						segs[i] = "x"
					}
				}
				url := a.URL + strings.Join(segs, "/")
				if query != "" {
					url += "?" + query
				}
				if code, detail := probeRoute(t, method, url); code == http.StatusMethodNotAllowed || code == http.StatusNotFound && strings.HasPrefix(detail, "no route") {
					t.Errorf("%s names `%s %s`, which the server does not have: %s %s answered %d %s", filepath.Base(f), m[1], m[2], method, url, code, detail)
				}
			}
		}
		if len(seen) < 30 {
			t.Fatalf("found %d routes named in the docs, want the 30 or more of api.md's tables", len(seen))
		}
	})
}

// probeRoute sends method to url with an empty JSON object as body, and
// returns the status and a problem's detail. A request the server holds
// past 3 s (a wait, a stream) reached a handler: it counts as 200.
func probeRoute(t *testing.T, method, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var body io.Reader
	if method == http.MethodPost || method == http.MethodPut {
		body = strings.NewReader("{}")
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return http.StatusOK, ""
		}
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, ""
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	detail := string(raw)
	if i := strings.Index(detail, `"detail":"`); i >= 0 {
		detail = detail[i+len(`"detail":"`):]
	}
	return resp.StatusCode, fmt.Sprintf("%.200s", detail)
}
