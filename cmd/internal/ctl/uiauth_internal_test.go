package ctl

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestBasicAuthComparesUserAndPasswordAlways: the dashboard's basic auth
// accepts only the configured user with its password, and compares both
// on every request, in constant time (secretEqual), whichever is wrong, so
// that the time taken does not reveal whether the user name was right.
func TestBasicAuthComparesUserAndPasswordAlways(t *testing.T) {
	compared := map[string]int{}
	real := secretEqual
	t.Cleanup(func() { secretEqual = real })
	secretEqual = func(got, want string) int {
		compared[want]++
		return real(got, want)
	}
	const user, pass = "operator", "correct-horse-battery"
	h := authMiddleware(uiAuth{user: user, pass: pass}, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	for _, tc := range []struct {
		user, pass string
		want       int
	}{
		{user, pass, http.StatusOK},
		{user, "wrong-password-000", http.StatusUnauthorized},
		{"intruder", pass, http.StatusUnauthorized},
		{"intruder", "wrong-password-000", http.StatusUnauthorized},
		{"", "", http.StatusUnauthorized},
		{user + "x", pass, http.StatusUnauthorized},
	} {
		clear(compared)
		req := httptest.NewRequest("GET", "http://dashboard.internal/", nil)
		req.SetBasicAuth(tc.user, tc.pass)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("basic auth %q:%q = %d, want %d", tc.user, tc.pass, rec.Code, tc.want)
		}
		if compared[user] != 1 || compared[pass] != 1 {
			t.Errorf("basic auth %q:%q compared the user name %d times and the password %d times, want once each",
				tc.user, tc.pass, compared[user], compared[pass])
		}
	}
}

// TestBearerSchemeIsCaseInsensitive: the dashboard reads its token as the
// API server does (apitoken.Bearer): the scheme in any case (RFC 9110
// §11.1), a wrong token or an empty one refused.
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	const token = "0123456789abcdef-token"
	h := authMiddleware(uiAuth{token: token}, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	for _, tc := range []struct {
		header string
		want   int
	}{
		{"Bearer " + token, http.StatusOK},
		{"bearer " + token, http.StatusOK},
		{"BEARER " + token, http.StatusOK},
		{"bEaReR " + token, http.StatusOK},
		{"bearer wrong-token-0000000", http.StatusUnauthorized},
		{"bearer ", http.StatusUnauthorized},
		{"Token " + token, http.StatusUnauthorized},
	} {
		req := httptest.NewRequest("GET", "http://dashboard.internal/", nil)
		req.Header.Set("Authorization", tc.header)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("Authorization: %q = %d, want %d", tc.header, rec.Code, tc.want)
		}
	}
}
