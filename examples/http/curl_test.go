package httpexamples

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/timerq/timerq/internal/redistest"
	"github.com/timerq/timerq/internal/workertest"
)

// curlStep is one command of docs/api-curl.md's session and the lines it
// shows.
type curlStep struct {
	cmd  string
	want []string
}

// readCurlSession reads the ```console blocks between <!-- curl session -->
// and <!-- end curl session -->: a "$ " line starts a command (a line
// ending in " \" goes on in the next), and the lines after it are its
// output.
func readCurlSession(t *testing.T, file string) []curlStep {
	t.Helper()
	doc, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "<!-- curl session -->")
	block, _, ok2 := strings.Cut(block, "<!-- end curl session -->")
	if !ok || !ok2 {
		t.Fatalf("%s has no <!-- curl session --> … <!-- end curl session --> block", file)
	}
	var steps []curlStep
	inFence, cont := false, false
	for _, line := range strings.Split(block, "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			inFence, cont = !inFence && strings.TrimPrefix(line, "```") == "console", false
			continue
		case !inFence:
			continue
		case cont:
			s := &steps[len(steps)-1]
			s.cmd += "\n" + line
			cont = strings.HasSuffix(line, `\`)
			continue
		}
		if cmd, ok := strings.CutPrefix(line, "$ "); ok {
			steps = append(steps, curlStep{cmd: cmd})
			cont = strings.HasSuffix(cmd, `\`)
			continue
		}
		if len(steps) == 0 {
			t.Fatalf("%s: the session's output %q comes before any $ command", file, line)
		}
		s := &steps[len(steps)-1]
		s.want = append(s.want, line)
	}
	return steps
}

var (
	// sessionTime is a time an answer shows. One before 2030 came from the
	// clock when the session was written, so it matches any time; a later
	// one was given in the command and must come back as it is.
	sessionTime = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`)
	anyTime     = `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`
)

// linePattern turns a line the session shows into a pattern: "…" matches
// anything, a time before 2030 any time, the rest itself.
func linePattern(line string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for i, part := range strings.Split(line, "…") {
		if i > 0 {
			b.WriteString(".*?")
		}
		last := 0
		for _, m := range sessionTime.FindAllStringIndex(part, -1) {
			b.WriteString(regexp.QuoteMeta(part[last:m[0]]))
			if part[m[0]:m[0]+4] < "2030" {
				b.WriteString(anyTime)
			} else {
				b.WriteString(regexp.QuoteMeta(part[m[0]:m[1]]))
			}
			last = m[1]
		}
		b.WriteString(regexp.QuoteMeta(part[last:]))
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// TestCurlWalkthrough runs docs/api-curl.md's session with bash and curl
// against a real timerworker serving namespace orders (on a redis-server
// of its own), and checks that each command prints the lines shown.
func TestCurlWalkthrough(t *testing.T) {
	bash := workertest.RequireTool(t, "bash")
	workertest.RequireTool(t, "curl")
	steps := readCurlSession(t, "../../docs/api-curl.md")
	all := ""
	for _, s := range steps {
		all += s.cmd + "\n"
	}
	for _, want := range []string{"/timers/batch", "/reschedule", "/cancel", "/wait", "/fires", "/schedules", "limit="} {
		if !strings.Contains(all, want) {
			t.Errorf("the curl session has no command with %q", want)
		}
	}

	redistest.Require(t)
	s := redistest.Start(t, redistest.Config{})
	b := workertest.Backend{Name: "standalone", URL: s.URL(), NS: "orders", Shards: 1}
	a := workertest.StartWorker(t, b)
	env := append(os.Environ(), "API="+a.URL+"/v1/namespaces/orders", "TOKEN="+a.Token)
	for _, st := range steps {
		out := strings.TrimSuffix(workertest.Run(t, time.Minute, ".", env, bash, "-c", st.cmd), "\n")
		got := strings.Split(out, "\n")
		ok := len(got) == len(st.want)
		for i := 0; ok && i < len(got); i++ {
			ok = linePattern(st.want[i]).MatchString(got[i])
		}
		if !ok {
			t.Errorf("$ %s\nprinted:\n%s\ndocs/api-curl.md shows:\n%s", st.cmd, out, strings.Join(st.want, "\n"))
		}
	}
}
