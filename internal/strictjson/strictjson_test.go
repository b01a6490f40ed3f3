package strictjson

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestCheckTextRefusesWhatDecodersChange: invalid UTF-8 and a lone
// surrogate escape (which encoding/json turns into U+FFFD) are refused,
// with the offending escape named; a proper pair and other escapes pass.
func TestCheckTextRefusesWhatDecodersChange(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"id":"a\ud83d\ude00b"}`, ""},
		{`{"id":"a\\ud800"}`, ""}, // an escaped backslash, then text
		{`{"id":"\u00e9\n"}`, ""},
		{"{\"id\":\"a\xffb\"}", "is not valid UTF-8 (byte 9 of it, 0xff)"},
		{`{"id":"sur\ud800"}`, `has \ud800, half of a UTF-16 surrogate pair, which is not a character`},
		{`{"id":"\udc00x"}`, `has \udc00, half of a UTF-16 surrogate pair, which is not a character`},
		{`{"id":"\uD800\u0041"}`, `has \uD800, half`},
	} {
		err := CheckText([]byte(c.in))
		var te *TextError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want nil", c.in, err)
		case c.want != "" && (!errors.As(err, &te) || len(te.Problem) < len(c.want) || te.Problem[:len(c.want)] != c.want):
			t.Errorf("%s: %v, want a TextError starting %q", c.in, err, c.want)
		}
	}
}

type inner struct {
	Endpoint *string `json:"endpoint"`
}

type item struct {
	ID      *string           `json:"id"`
	Raw     json.RawMessage   `json:"raw"`
	Headers map[string]string `json:"headers"`
	Deliver *inner            `json:"deliver"`
	Skip    string            `json:"-"`
	NoTag   int
}

type embedded struct{ item }

type body struct {
	Items []item `json:"items"`
	One   item   `json:"one"`
}

// TestCheckKeysRefusesRepeatsAndCaseVariants: a repeated key and a key
// that differs from its field's name only in case (as encoding/json would
// take them) are refused with the object's pointer, at every depth; exact
// keys pass, and keys no field matches are left to the decoder.
func TestCheckKeysRefusesRepeatsAndCaseVariants(t *testing.T) {
	for _, c := range []struct {
		in   string
		v    any
		want *KeyError
	}{
		{`{"id":"a","raw":{"x":1},"headers":{"A":"1","a":"2"},"deliver":{"endpoint":"e"},"NoTag":1}`, &item{}, nil},
		{`{"id":"a","id":"b"}`, &item{}, &KeyError{Key: "id"}},
		{`{"ID":"a"}`, &item{}, &KeyError{Key: "ID", Field: "id"}},
		{`{"\u0049\u0044":"a"}`, &item{}, &KeyError{Key: "ID", Field: "id"}},
		{"{\"i\\u0064\":\"a\",\"id\":\"b\"}", &item{}, &KeyError{Key: "id"}},
		{`{"notag":1}`, &item{}, &KeyError{Key: "notag", Field: "NoTag"}},
		{`{"unknown":1,"Skip":"x"}`, &item{}, nil},
		{`{"headers":{"A":"1","A":"2"}}`, &item{}, &KeyError{Pointer: "/headers", Key: "A"}},
		{`{"raw":{"a":1,"a":2}}`, &item{}, &KeyError{Pointer: "/raw", Key: "a"}},
		{`{"deliver":{"Endpoint":"e"}}`, &item{}, &KeyError{Pointer: "/deliver", Key: "Endpoint", Field: "endpoint"}},
		{`{"items":[{"id":"a"},{"id":"b","Id":"c"}]}`, &body{}, &KeyError{Pointer: "/items/1", Key: "Id", Field: "id"}},
		{`{"one":{"deliver":{"endpoint":"e","endpoint":"f"}}}`, &body{}, &KeyError{Pointer: "/one/deliver", Key: "endpoint"}},
		{`{"ID":"a"}`, &embedded{}, &KeyError{Key: "ID", Field: "id"}},
		{"{\"id\":\"\u212a\"}", &item{}, nil},             // a value, not a key
		{"{\"\u017fkip\":1,\"i\u212a\":1}", &item{}, nil}, // folds to no field here
		{"{\"headers\":{},\"HEADERS\":{}}", &item{}, &KeyError{Key: "HEADERS", Field: "headers"}},
		{"[{\"a\":1},{\"a\":1,\"a\":2}]", new(any), &KeyError{Pointer: "/1", Key: "a"}},
		{"{\"a/b~\":{\"x\":1,\"x\":1}}", new(any), &KeyError{Pointer: "/a~1b~0", Key: "x"}},
	} {
		if !json.Valid([]byte(c.in)) {
			t.Fatalf("%s is not valid JSON", c.in)
		}
		err := CheckKeys([]byte(c.in), c.v)
		var ke *KeyError
		switch {
		case c.want == nil && err != nil:
			t.Errorf("%s: %v, want nil", c.in, err)
		case c.want != nil && (!errors.As(err, &ke) || *ke != *c.want):
			t.Errorf("%s: %#v, want %#v", c.in, err, c.want)
		}
	}
}

// TestCheckKeysMatchesWhatEncodingJSONFolds: every key encoding/json
// fills a field from without naming it exactly, CheckKeys refuses; the
// Kelvin sign and the long s are folds encoding/json makes too.
func TestCheckKeysMatchesWhatEncodingJSONFolds(t *testing.T) {
	type kv struct {
		K string `json:"k"`
		S string `json:"s"`
	}
	for _, key := range []string{"K", "\u212a", "S", "\u017f"} {
		in := `{"` + key + `":"x"}`
		var v kv
		if err := json.Unmarshal([]byte(in), &v); err != nil || v == (kv{}) {
			t.Fatalf("%s: encoding/json did not fold it (%v %+v): the test's premise is wrong", in, err, v)
		}
		if err := CheckKeys([]byte(in), &v); err == nil {
			t.Errorf("%s: accepted, though encoding/json fills a field from it", in)
		}
	}
}
