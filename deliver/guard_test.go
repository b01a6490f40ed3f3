package deliver_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/timerq/timerq/deliver"
)

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

// sink is a local endpoint that counts the requests it gets.
type sink struct {
	*httptest.Server
	hits atomic.Int64
	mu   sync.Mutex
	reqs []*http.Request
	body [][]byte
}

func newSink(t *testing.T, h http.HandlerFunc) *sink {
	t.Helper()
	s := &sink{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := r.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		s.mu.Lock()
		s.reqs = append(s.reqs, r)
		s.body = append(s.body, []byte(b.String()))
		s.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(s.Close)
	return s
}

func newSender(t *testing.T, g *deliver.Guard) *deliver.Sender {
	s := &deliver.Sender{Guard: g}
	t.Cleanup(s.CloseIdleConnections)
	return s
}

func fire(id string) deliver.Fire {
	due := time.Now().Add(-time.Millisecond).Truncate(time.Millisecond)
	return deliver.Fire{Namespace: "ns", TimerID: id, Due: due, FiredAt: due, Payload: []byte(`{"n":1}`), Attempt: 1}
}

// The default guard refuses a loopback target at dial time, before a byte
// is sent; allowing 127.0.0.1/32 lets the same request through.
func TestGuardRefusesLoopbackUnlessAllowed(t *testing.T) {
	s := newSink(t, nil)
	ep := deliver.Endpoint{Name: "local", URL: s.URL + "/hook"}

	a := newSender(t, nil).Send(context.Background(), ep, fire("t1"))
	if a.Outcome != deliver.DeadLetter || a.Reason != deliver.ReasonRefused || a.Status != 0 {
		t.Fatalf("default guard: %+v, want a dead letter refused by the guard", a)
	}
	if !strings.Contains(a.Error, "loopback") {
		t.Fatalf("error %q does not say why", a.Error)
	}
	if n := s.hits.Load(); n != 0 {
		t.Fatalf("the refused target got %d requests", n)
	}

	a = newSender(t, &deliver.Guard{Allow: loopback}).Send(context.Background(), ep, fire("t1"))
	if a.Outcome != deliver.Delivered || a.Status != 204 {
		t.Fatalf("with 127.0.0.1/32 allowed: %+v, want delivered", a)
	}
	if n := s.hits.Load(); n != 1 {
		t.Fatalf("the allowed target got %d requests, want 1", n)
	}
}

func TestCheckAddr(t *testing.T) {
	wide := &deliver.Guard{Allow: []netip.Prefix{
		netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("fd00::/8"),
	}}
	exact := &deliver.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("169.254.169.254/32")}}
	hosts := &deliver.Guard{AllowHosts: []string{"Hooks.Internal."}}
	for _, tc := range []struct {
		g    *deliver.Guard
		host string
		addr string
		ok   bool
	}{
		{nil, "", "93.184.216.34", true},
		{nil, "", "2606:2800:220:1:248:1893:25c8:1946", true},
		{nil, "", "127.0.0.1", false},
		{nil, "", "127.8.9.10", false},
		{nil, "", "::1", false},
		{nil, "", "::ffff:127.0.0.1", false},
		{nil, "", "10.0.0.1", false},
		{nil, "", "172.16.5.4", false},
		{nil, "", "172.32.0.1", true},
		{nil, "", "192.168.1.1", false},
		{nil, "", "100.64.0.1", false},
		{nil, "", "100.127.255.255", false},
		{nil, "", "100.128.0.1", true},
		{nil, "", "169.254.1.1", false},
		{nil, "", "fe80::1", false},
		{nil, "", "fe80::1%eth0", false},
		{nil, "", "::127.0.0.1", false},
		{nil, "", "64:ff9b::127.0.0.1", false},
		{nil, "", "64:ff9b::169.254.169.254", false},
		{nil, "", "64:ff9b::93.184.216.34", true},
		{nil, "", "::ffff:169.254.169.254", false},
		{nil, "", "::ffff:10.1.2.3", false},
		{nil, "", "2002:a9fe:a9fe::", false},    // 6to4 of 169.254.169.254
		{nil, "", "2002:7f00:1::1", false},      // 6to4 of 127.0.0.1
		{nil, "", "2002:0a00:0001:5::9", false}, // 6to4 of 10.0.0.1
		{nil, "", "2002:5db8:d822::1", true},    // 6to4 of 93.184.216.34
		{nil, "", "64:ff9b::10.0.0.1", false},
		{wide, "", "2002:0a01:0203::1", true}, // 6to4 of an allowed 10.1.2.3
		{wide, "", "2002:a9fe:a9fe::", false}, // a wide range does not open metadata through 6to4
		{exact, "", "2002:a9fe:a9fe::", true},
		{nil, "", "fc00::1", false},
		{nil, "", "fd12:3456::1", false},
		{nil, "", "224.0.0.1", false},
		{nil, "", "ff02::1", false},
		{nil, "", "0.0.0.0", false},
		{nil, "", "::", false},
		{nil, "", "255.255.255.255", false},
		{nil, "", "169.254.169.254", false},
		{nil, "", "168.63.129.16", false},
		{nil, "", "fd00:ec2::254", false},
		{wide, "", "10.1.2.3", true},
		{wide, "", "10.2.0.1", false},
		{wide, "", "169.254.1.1", true},
		{wide, "", "169.254.169.254", false}, // a wide range does not open metadata
		{wide, "", "fd00:ec2::254", false},
		{wide, "", "fd00::5", true},
		{exact, "", "169.254.169.254", true},
		{exact, "", "169.254.170.2", false},
		{hosts, "hooks.internal", "10.9.9.9", true},
		{hosts, "other.internal", "10.9.9.9", false},
	} {
		err := tc.g.CheckAddr(tc.host, netip.MustParseAddr(tc.addr))
		if tc.ok != (err == nil) {
			t.Errorf("guard %v: CheckAddr(%q, %s) = %v, want ok=%v", tc.g, tc.host, tc.addr, err, tc.ok)
		}
		if err != nil && !errors.Is(err, deliver.ErrRefused) {
			t.Errorf("CheckAddr(%s) = %v, not ErrRefused", tc.addr, err)
		}
	}
}

func TestValidateURL(t *testing.T) {
	allow := &deliver.Guard{Allow: loopback}
	for _, tc := range []struct {
		g   *deliver.Guard
		url string
		err error
	}{
		{nil, "https://billing.example.com/hooks/timerq", nil},
		{nil, "http://93.184.216.34:8080/x?y=1", nil},
		{nil, "ftp://example.com/", deliver.ErrInvalidURL},
		{nil, "file:///etc/passwd", deliver.ErrInvalidURL},
		{nil, "example.com/hook", deliver.ErrInvalidURL},
		{nil, "https://user:pass@example.com/", deliver.ErrInvalidURL},
		{nil, "https://user@example.com/", deliver.ErrInvalidURL},
		{nil, "https:///path", deliver.ErrInvalidURL},
		{nil, "https://example.com/#frag", deliver.ErrInvalidURL},
		{nil, "https://example.com/" + strings.Repeat("a", 2048), deliver.ErrInvalidURL},
		{nil, "http://127.0.0.1:9000/", deliver.ErrRefused},
		{nil, "http://[::1]:9000/", deliver.ErrRefused},
		{nil, "http://[fe80::1%25eth0]:9000/", deliver.ErrRefused},
		{nil, "http://10.0.0.8/", deliver.ErrRefused},
		{nil, "http://169.254.169.254/latest/meta-data/", deliver.ErrRefused},
		{nil, "http://localhost:9000/", deliver.ErrRefused},
		{nil, "http://api.LOCALHOST./", deliver.ErrRefused},
		{allow, "http://127.0.0.1:9000/", nil},
		{allow, "http://10.0.0.8/", deliver.ErrRefused},
		{nil, "https://bücher.example/hooks", nil},
		{nil, "https://my_host.internal/hooks", nil},
		{nil, "https://api.v2.example.com/hooks", nil},
		{nil, "https://1password.example/hooks", nil},
		// IPv4 addresses written other than as four decimal numbers, which
		// resolvers read as addresses (inet_aton, the WHATWG URL parser,
		// IDNA's mapping of full-width and circled digits and dots),
		// whatever range they are in: refused for their form, so that the
		// guard never has to guess what a resolver will make of them.
		{nil, "http://0x7f000001/", deliver.ErrInvalidURL},
		{nil, "http://0X7F.0.0.1/", deliver.ErrInvalidURL},
		{nil, "http://2130706433/", deliver.ErrInvalidURL},
		{nil, "http://0177.0.0.1/", deliver.ErrInvalidURL},
		{nil, "http://127.1/", deliver.ErrInvalidURL},
		{nil, "http://127.0.1/", deliver.ErrInvalidURL},
		{nil, "http://0/", deliver.ErrInvalidURL},
		{nil, "http://0.0.0.0./", deliver.ErrInvalidURL},
		{nil, "http://127.0.0.1./", deliver.ErrInvalidURL},
		{nil, "http://1.2.3.4.5/", deliver.ErrInvalidURL},
		{nil, "http://1593350178/", deliver.ErrInvalidURL}, // 94.248.152.34, public, but not written as such
		{allow, "http://2130706433/", deliver.ErrInvalidURL},
		{nil, "http://[2002:a9fe:a9fe::]/", deliver.ErrRefused},
		{nil, "http://[::ffff:7f00:1]/", deliver.ErrRefused},
		{nil, "http://[64:ff9b::a9fe:a9fe]/", deliver.ErrRefused},
		{nil, "http://１２７．０．０．１/", deliver.ErrInvalidURL},
		{nil, "http://127。0。0。1/", deliver.ErrInvalidURL},
		{nil, "http://①②⑦.0.0.1/", deliver.ErrInvalidURL},
		{nil, "http://９３.184.216.34/", deliver.ErrInvalidURL},
		{allow, "http://１２７．０．０．１/", deliver.ErrInvalidURL},
		{nil, "http://ｌｏｃａｌｈｏｓｔ/", deliver.ErrRefused},
	} {
		_, err := deliver.ValidateURL(tc.url, tc.g)
		if tc.err == nil && err != nil || tc.err != nil && !errors.Is(err, tc.err) {
			t.Errorf("ValidateURL(%q) = %v, want %v", tc.url, err, tc.err)
		}
	}
	// The refusal says what to write instead.
	for raw, want := range map[string]string{
		"http://0x7f000001/":         "four decimal numbers",
		"http://１２７．０．０．１/":          "127.0.0.1",
		"http://[2002:a9fe:a9fe::]/": "6to4",
	} {
		if _, err := deliver.ValidateURL(raw, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateURL(%q) = %v; want a message with %q", raw, err, want)
		}
	}
}

// fakeDNS answers every A query with whatever addr holds at the time, and
// AAAA queries with nothing: a name whose address the test changes at
// will, as a rebinding attacker's DNS does.
type fakeDNS struct {
	conn    net.PacketConn
	addr    atomic.Pointer[netip.Addr]
	queries atomic.Int64
	done    chan struct{}
}

func startFakeDNS(t *testing.T) *fakeDNS {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &fakeDNS{conn: c, done: make(chan struct{})}
	go func() {
		defer close(d.done)
		buf := make([]byte, 1500)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			d.queries.Add(1)
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionAvailable: true})
			b.EnableCompression()
			b.StartQuestions()
			b.Question(q)
			b.StartAnswers()
			if a := d.addr.Load(); a != nil && q.Type == dnsmessage.TypeA {
				b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0}, dnsmessage.AResource{A: a.As4()})
			}
			out, err := b.Finish()
			if err == nil {
				c.WriteTo(out, from)
			}
		}
	}()
	t.Cleanup(func() { c.Close(); <-d.done })
	return d
}

func (d *fakeDNS) set(a string) { v := netip.MustParseAddr(a); d.addr.Store(&v) }

func (d *fakeDNS) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var nd net.Dialer
		return nd.DialContext(ctx, "udp", d.conn.LocalAddr().String())
	}}
}

// DNS rebinding: a name that resolved to a public address when the
// endpoint was registered resolves to loopback when the request is made.
// The guard checks the address dialled, so the request is refused and the
// local service never sees it; allowing 127.0.0.1/32 lets the same name
// through, which shows the refusal came from the guard and not from DNS.
func TestGuardRefusesARebindingName(t *testing.T) {
	s := newSink(t, nil)
	dns := startFakeDNS(t)
	_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
	url := "http://rebind.timerq.test:" + port + "/hook"
	g := &deliver.Guard{Resolver: dns.resolver()}

	dns.set("93.184.216.34")
	if _, err := g.ResolveURL(context.Background(), url); err != nil {
		t.Fatalf("registration-time check of a public name: %v", err)
	}
	dns.set("127.0.0.1")
	if _, err := g.ResolveURL(context.Background(), url); !errors.Is(err, deliver.ErrRefused) {
		t.Fatalf("registration-time check of a loopback name = %v, want ErrRefused", err)
	}
	before := dns.queries.Load()
	a := newSender(t, g).Send(context.Background(), deliver.Endpoint{Name: "rebind", URL: url}, fire("t1"))
	if a.Reason != deliver.ReasonRefused || !strings.Contains(a.Error, "127.0.0.1 is a loopback") {
		t.Fatalf("request to the rebound name: %+v, want refused at dial", a)
	}
	if dns.queries.Load() == before {
		t.Fatal("the request did not resolve the name through the guard's resolver")
	}
	if n := s.hits.Load(); n != 0 {
		t.Fatalf("the local service got %d requests", n)
	}

	g2 := &deliver.Guard{Resolver: dns.resolver(), Allow: loopback}
	if a := newSender(t, g2).Send(context.Background(), deliver.Endpoint{Name: "rebind", URL: url}, fire("t1")); a.Outcome != deliver.Delivered {
		t.Fatalf("with 127.0.0.1/32 allowed: %+v, want delivered", a)
	}
	if n := s.hits.Load(); n != 1 {
		t.Fatalf("the allowed service got %d requests, want 1", n)
	}
}

// Redirects: not followed by default (the 3xx is the answer, a dead
// letter); followed when allowed, with every hop checked, so a hop to a
// refused address goes nowhere.
func TestGuardRedirects(t *testing.T) {
	target := newSink(t, nil)
	// 127.0.0.2 is loopback too, and not in the allow list.
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	forbidden := &sink{Server: httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))}
	forbidden.Listener.Close()
	forbidden.Listener = ln
	var forbiddenHits atomic.Int64
	forbidden.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { forbiddenHits.Add(1) })
	forbidden.Start()
	t.Cleanup(forbidden.Close)

	to := func(u string) *sink {
		return newSink(t, func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, u, http.StatusTemporaryRedirect) })
	}
	toTarget, toForbidden := to(target.URL+"/final"), to(forbidden.URL+"/internal")
	toMeta := to("http://169.254.169.254/latest/meta-data/")

	a := newSender(t, &deliver.Guard{Allow: loopback}).Send(context.Background(), deliver.Endpoint{URL: toTarget.URL}, fire("t1"))
	if a.Status != http.StatusTemporaryRedirect || a.Outcome != deliver.DeadLetter || a.Reason != deliver.ReasonRedirect {
		t.Fatalf("redirect without MaxRedirects: %+v, want the 307 as a dead letter", a)
	}
	if !strings.Contains(a.Error, "--deliver-max-redirects") || !strings.Contains(a.Error, "/final") {
		t.Errorf("redirect without MaxRedirects: attempt error %q does not say why nor where", a.Error)
	}
	if target.hits.Load() != 0 {
		t.Fatal("a redirect was followed without MaxRedirects")
	}

	g := &deliver.Guard{Allow: loopback, MaxRedirects: 3}
	snd := newSender(t, g)
	if a := snd.Send(context.Background(), deliver.Endpoint{URL: toTarget.URL}, fire("t1")); a.Outcome != deliver.Delivered {
		t.Fatalf("allowed redirect to an allowed address: %+v", a)
	}
	if target.hits.Load() != 1 {
		t.Fatalf("the redirect target got %d requests, want 1", target.hits.Load())
	}
	for _, src := range []*sink{toForbidden, toMeta} {
		a := snd.Send(context.Background(), deliver.Endpoint{URL: src.URL}, fire("t1"))
		if a.Reason != deliver.ReasonRefused || !strings.Contains(a.Error, "redirect") {
			t.Fatalf("redirect to a refused address: %+v, want refused", a)
		}
	}
	if forbiddenHits.Load() != 0 {
		t.Fatal("a redirect reached a refused address")
	}
}

// Redirects with --deliver-max-redirects: only 307 and 308, which keep
// the POST and its body, are followed. The endpoint's configured headers
// and the signature go only to the endpoint's own origin (scheme, host
// and port), and no hop carries a Referer. A 301, 302 or 303, which a
// client follows with a GET without the body, is not followed: a failed
// attempt that says why, and nothing reaches the Location.
func TestGuardRedirectKeepsTheRequestAndItsSecretsAtHome(t *testing.T) {
	other := newSink(t, nil) // another origin: another port
	home := newSink(t, func(w http.ResponseWriter, r *http.Request) {
		switch code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/to-other/")); {
		case r.URL.Path == "/same":
			http.Redirect(w, r, "/final", http.StatusPermanentRedirect)
		case code != 0:
			http.Redirect(w, r, other.URL+"/landed", code)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
	sec, _ := deliver.ParseSecret(deliver.GenerateSecret())
	configured := map[string]string{"Authorization": "Bearer t0k", "X-Api-Key": "k3y"}
	snd := newSender(t, &deliver.Guard{Allow: loopback, MaxRedirects: 3})
	f := fire("t1")
	send := func(path string) deliver.Attempt {
		return snd.Send(context.Background(), deliver.Endpoint{Name: "e", URL: home.URL + path, Headers: configured, Secrets: []deliver.Secret{sec}}, f)
	}

	// The same origin: everything goes on, but no Referer.
	if a := send("/same"); a.Outcome != deliver.Delivered {
		t.Fatalf("308 to the same origin: %+v", a)
	}
	if len(home.reqs) != 2 {
		t.Fatalf("the endpoint's origin got %d requests, want 2", len(home.reqs))
	}
	r := home.reqs[1]
	if r.Method != http.MethodPost || string(home.body[1]) != string(f.Payload) || r.URL.Path != "/final" {
		t.Errorf("308 to the same origin arrived as %s %s %q", r.Method, r.URL.Path, home.body[1])
	}
	for k := range configured {
		if r.Header.Get(k) == "" {
			t.Errorf("308 to the same origin lost the configured header %s", k)
		}
	}
	if r.Header.Get(deliver.HeaderSignature) == "" || r.Header.Get("Referer") != "" {
		t.Errorf("308 to the same origin: signature %q, Referer %q; want the signature and no Referer", r.Header.Get(deliver.HeaderSignature), r.Header.Get("Referer"))
	}

	// Another origin: the POST and its body, none of the endpoint's secrets.
	for i, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		if a := send("/to-other/" + strconv.Itoa(code)); a.Outcome != deliver.Delivered {
			t.Fatalf("%d to another origin: %+v", code, a)
		}
		if len(other.reqs) != i+1 {
			t.Fatalf("%d: the other origin got %d requests, want %d", code, len(other.reqs), i+1)
		}
		r := other.reqs[i]
		if r.Method != http.MethodPost || string(other.body[i]) != string(f.Payload) {
			t.Errorf("%d to another origin arrived as %s %q; want the POST and its body", code, r.Method, other.body[i])
		}
		for _, k := range []string{"Authorization", "X-Api-Key", deliver.HeaderSignature, "Referer"} {
			if v := r.Header.Get(k); v != "" {
				t.Errorf("%d to another origin carried %s: %q", code, k, v)
			}
		}
	}

	// The redirects that turn the POST into a GET are not followed.
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther} {
		before := other.hits.Load()
		a := send("/to-other/" + strconv.Itoa(code))
		if a.Status != code || a.Outcome != deliver.DeadLetter || a.Reason != deliver.ReasonRedirect {
			t.Errorf("%d: %+v; want a dead letter for redirect with its status", code, a)
		}
		if !strings.Contains(a.Error, "307") || !strings.Contains(a.Error, "/landed") {
			t.Errorf("%d: attempt error %q does not say where it pointed and what is followed", code, a.Error)
		}
		if n := other.hits.Load() - before; n != 0 {
			t.Errorf("%d was followed: the other origin got %d requests", code, n)
		}
	}
}

// At dial time too, the IPv6 forms that reach an IPv4 address (IPv4-mapped,
// NAT64, 6to4) are judged by that address: refused before a connection.
func TestGuardRefusesIPv6FormsOfRefusedIPv4AtDial(t *testing.T) {
	snd := newSender(t, nil)
	for _, host := range []string{"[::ffff:127.0.0.1]", "[64:ff9b::7f00:1]", "[2002:7f00:1::1]", "[2002:a9fe:a9fe::]"} {
		a := snd.Send(context.Background(), deliver.Endpoint{URL: "http://" + host + ":9/hook"}, fire("t1"))
		if a.Outcome != deliver.DeadLetter || a.Reason != deliver.ReasonRefused || a.Status != 0 {
			t.Errorf("%s: %+v; want refused by the guard when dialled", host, a)
		}
	}
}
