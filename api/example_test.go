package api_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/timerq/timerq/api"
)

// Mount the API in an application's own server, then create a timer and
// read it back over HTTP. To authenticate, give Options.Authorize: each
// route asks it for its right once the router matched (docs/api.md,
// "Rights").
func ExampleNew() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	mr.SetTime(time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)) // the Redis server's clock, fixed for the output
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	h, err := api.New(api.Options{Client: rdb})
	if err != nil {
		panic(err)
	}
	defer h.Close()
	mux := http.NewServeMux()
	mux.Handle("/v1/", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	body := `{"id": "order-42", "due_at": "2030-01-01T00:00:00Z", "payload_text": "expire order 42"}`
	for range 2 { // idempotent: created, then found
		res, err := http.Post(srv.URL+"/v1/namespaces/orders/timers", "application/json", strings.NewReader(body))
		if err != nil {
			panic(err)
		}
		res.Body.Close()
		fmt.Println(res.Status)
	}
	res, err := http.Get(srv.URL + "/v1/namespaces/orders/timers/order-42")
	if err != nil {
		panic(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	fmt.Print(string(b))
	// Output:
	// 201 Created
	// 200 OK
	// {"id":"order-42","state":"scheduled","due_at":"2030-01-01T00:00:00.000Z","created_at":"2026-12-04T18:00:00.000Z","fired_at":null,"cancelled_at":null,"payload":"ZXhwaXJlIG9yZGVyIDQy"}
}
