package main

// Recurring schedules may name any IANA time zone (--tz), and the image
// (alpine) ships no zoneinfo: embed it, about 450 KB.
import _ "time/tzdata"
