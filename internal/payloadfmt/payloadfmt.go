// Package payloadfmt is how timerq's operator tools show a timer's payload:
// timerctl's tables and the dashboard print the same preview, text when
// the payload is printable UTF-8 and otherwise its size and first bytes in
// hex, never raw control bytes.
package payloadfmt

import (
	"encoding/hex"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// hexBytes is how many leading bytes a binary preview shows.
const hexBytes = 16

// Preview shows p on one line in at most maxRunes runes of text: the text
// itself when it is printable UTF-8 (cut with "…"), otherwise
// "<40 bytes: 00ff…>", its size and first bytes in hex. Empty is "".
func Preview(p []byte, maxRunes int) string {
	if len(p) == 0 {
		return ""
	}
	if !Printable(p, false) {
		s := "<" + strconv.Itoa(len(p)) + " bytes: " + hex.EncodeToString(p[:min(len(p), hexBytes)])
		if len(p) > hexBytes {
			s += "…"
		}
		return s + ">"
	}
	s := string(p)
	if utf8.RuneCountInString(s) > maxRunes {
		s = string([]rune(s)[:max(maxRunes-1, 0)]) + "…"
	}
	return s
}

// Printable reports whether p is UTF-8 of printable characters only, so
// that it can be shown as text; multiline allows newlines and tabs too, for
// a full view such as the dashboard's timer page.
func Printable(p []byte, multiline bool) bool {
	if !utf8.Valid(p) {
		return false
	}
	for _, r := range string(p) {
		if unicode.IsPrint(r) || multiline && (r == '\n' || r == '\t' || r == '\r') {
			continue
		}
		return false
	}
	return true
}
