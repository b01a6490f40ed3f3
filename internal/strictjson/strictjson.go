// Package strictjson holds the rules timerq's JSON inputs (the HTTP API's
// request bodies, timerctl import's lines) keep beyond what encoding/json
// checks: encoding/json turns invalid UTF-8 and a lone surrogate escape
// into U+FFFD, so an ID would be stored changed; it lets the last of two
// equal keys win; and it matches a key to a field case-insensitively, so
// that "ID" fills `json:"id"` although unknown fields are refused.
package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// TextError is JSON text that is not what its decoder must see: invalid
// UTF-8, or a \u escape of half a UTF-16 surrogate pair.
type TextError struct {
	// Offset is the 0-based byte offset of the fault.
	Offset int
	// Problem is what is wrong, without its subject: "is not valid UTF-8
	// (byte 9 of it, 0xff)", "has \ud800, half of a UTF-16 surrogate
	// pair, which is not a character". The caller names the subject ("the
	// line", "the body").
	Problem string
}

func (e *TextError) Error() string { return "the JSON text " + e.Problem }

// CheckText refuses data that is not valid UTF-8, or whose strings hold a
// \u escape of a lone UTF-16 surrogate (a high one not followed by an
// escaped low one, or a low one alone), which JSON decoders replace with
// U+FFFD. It returns a *TextError.
func CheckText(data []byte) error {
	if !utf8.Valid(data) {
		i := 0
		for i < len(data) {
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return &TextError{i, fmt.Sprintf("is not valid UTF-8 (byte %d of it, 0x%02x)", i+1, data[i])}
	}
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' || i+1 >= len(data) {
			continue
		}
		i++ // the escaped character
		if data[i] != 'u' || i+4 >= len(data) {
			continue
		}
		r, ok := hex4(data[i+1 : i+5])
		if !ok || !utf16.IsSurrogate(r) {
			continue
		}
		// A high surrogate must be followed by an escaped low one.
		if r < 0xdc00 && i+10 < len(data) && data[i+5] == '\\' && data[i+6] == 'u' {
			if lo, ok := hex4(data[i+7 : i+11]); ok && lo >= 0xdc00 && lo <= 0xdfff {
				i += 10
				continue
			}
		}
		return &TextError{i - 1, fmt.Sprintf("has %s, half of a UTF-16 surrogate pair, which is not a character", data[i-1:i+5])}
	}
	return nil
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	n, err := strconv.ParseUint(string(b), 16, 16)
	return rune(n), err == nil
}

// KeyError is an object key CheckKeys refuses.
type KeyError struct {
	// Pointer is the JSON pointer of the object holding the key ("" for
	// the top level, "/timers/3").
	Pointer string
	// Key is the key as given.
	Key string
	// Field is the key the type has, when Key differs from it only in
	// case ("id" for "ID"); "" for a key given twice.
	Field string
}

func (e *KeyError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("key %q is given twice", e.Key)
	}
	return fmt.Sprintf("unknown field %q: keys are case-sensitive; the field is %q", e.Key, e.Field)
}

// CheckKeys refuses, in data, an object key given twice (encoding/json
// would keep the last), and a key that is not exactly the JSON name of a
// field of the struct it decodes into but matches one case-insensitively
// (encoding/json would fill that field). v is the value data decodes
// into, as for json.Unmarshal; the walk follows its type into nested
// structs, slices, maps and pointers, and stops at a type that decodes
// itself (json.Unmarshaler, such as json.RawMessage) only to check that
// value's keys for repeats. Keys no field matches are left to
// json.Decoder.DisallowUnknownFields. data must be valid JSON (decode it
// first); CheckKeys returns a *KeyError, or nil.
func CheckKeys(data []byte, v any) error {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	w := walker{data: data}
	return w.value(t, nil)
}

// step is one step of the JSON pointer to the value being walked: a key,
// or an array's index. The pointer is spelled out only for an
// error, so that a walk costs no string per value.
type step struct {
	up    *step
	isKey bool
	key   []byte
	index int
}

func (s *step) String() string {
	if s == nil {
		return ""
	}
	if !s.isKey {
		return s.up.String() + "/" + strconv.Itoa(s.index)
	}
	return s.up.String() + "/" + escape(string(s.key))
}

// walker scans valid JSON text; i is its position.
type walker struct {
	data []byte
	i    int
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

func (w *walker) space() {
	for w.i < len(w.data) && (w.data[w.i] == ' ' || w.data[w.i] == '\t' || w.data[w.i] == '\n' || w.data[w.i] == '\r') {
		w.i++
	}
}

// value walks the value at w.i, which decodes into t (nil: any value,
// whose keys are checked for repeats only).
func (w *walker) value(t reflect.Type, at *step) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (t.Implements(unmarshaler) || reflect.PointerTo(t).Implements(unmarshaler)) {
		t = nil
	}
	w.space()
	if w.i >= len(w.data) {
		return nil
	}
	switch w.data[w.i] {
	case '{':
		return w.object(t, at)
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		w.i++
		for n := 0; ; n++ {
			w.space()
			if w.i < len(w.data) && w.data[w.i] == ']' {
				w.i++
				return nil
			}
			if err := w.value(elem, &step{up: at, index: n}); err != nil {
				return err
			}
			w.space()
			if w.i < len(w.data) && w.data[w.i] == ',' {
				w.i++
			}
		}
	case '"':
		w.str()
	default: // a number, true, false or null
		for w.i < len(w.data) && !strings.ContainsRune(",]} \t\n\r", rune(w.data[w.i])) {
			w.i++
		}
	}
	return nil
}

func (w *walker) object(t reflect.Type, at *step) error {
	var fields map[string]field
	var elem reflect.Type
	switch {
	case t == nil:
	case t.Kind() == reflect.Struct:
		fields = fieldsOf(t)
	case t.Kind() == reflect.Map:
		elem = t.Elem()
	}
	// The keys seen so far: a few in a list, which costs no allocation
	// for the small objects of requests; a map once an object (a map
	// field) holds more, so that a huge one stays linear.
	var few [16][]byte
	seen := few[:0]
	var many map[string]bool
	w.i++ // {
	for {
		w.space()
		if w.i >= len(w.data) || w.data[w.i] == '}' {
			w.i++
			return nil
		}
		key := w.str()
		if bytes.IndexByte(key, '\\') >= 0 {
			// An escaped key ("\u0069d") is the key it spells.
			var s string
			_ = json.Unmarshal(append(append([]byte{'"'}, key...), '"'), &s)
			key = []byte(s)
		}
		dup := false
		switch {
		case many != nil:
			dup = many[string(key)]
			many[string(key)] = true
		case len(seen) < len(few):
			for _, k := range seen {
				dup = dup || bytes.Equal(k, key)
			}
			seen = append(seen, key)
		default:
			many = make(map[string]bool, 2*len(few))
			for _, k := range seen {
				many[string(k)] = true
			}
			dup = many[string(key)]
			many[string(key)] = true
		}
		if dup {
			return &KeyError{Pointer: at.String(), Key: string(key)}
		}
		next := elem
		if fields != nil {
			f, ok := fields[string(key)]
			if !ok {
				for name := range fields {
					// encoding/json's match (foldName) is bytes.EqualFold.
					if bytes.EqualFold([]byte(name), key) {
						return &KeyError{Pointer: at.String(), Key: string(key), Field: name}
					}
				}
			}
			next = f.typ // nil for an unknown key, left to the decoder
		}
		w.space()
		w.i++ // :
		if err := w.value(next, &step{up: at, isKey: true, key: key}); err != nil {
			return err
		}
		w.space()
		if w.i < len(w.data) && w.data[w.i] == ',' {
			w.i++
		}
	}
}

// str reads the string at w.i and returns its text between the quotes,
// escapes as they are.
func (w *walker) str() []byte {
	w.i++ // "
	start := w.i
	for w.i < len(w.data) && w.data[w.i] != '"' {
		if w.data[w.i] == '\\' {
			w.i++
		}
		w.i++
	}
	s := w.data[start:min(w.i, len(w.data))]
	w.i++ // "
	return s
}

// field is a struct field as encoding/json sees it.
type field struct{ typ reflect.Type }

var fieldCache sync.Map // reflect.Type -> map[string]field

// fieldsOf returns t's fields by JSON name, as encoding/json names them:
// the tag's name, else the Go name; "-" skipped; an untagged embedded
// struct's fields promoted.
func fieldsOf(t reflect.Type) map[string]field {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]field)
	}
	out := map[string]field{}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := sf.Type
		if sf.Anonymous && name == "" {
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range fieldsOf(ft) {
					if _, ok := out[k]; !ok {
						out[k] = v
					}
				}
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		out[name] = field{ft}
	}
	fieldCache.Store(t, out)
	return out
}

// escape escapes a key for a JSON pointer (RFC 6901).
func escape(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}
