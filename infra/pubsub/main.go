// Command pubsub-emulator serves the Pub/Sub fake of Google's Go client library
// (cloud.google.com/go/pubsub/v2/pstest) over gRPC on one loopback address, so
// crdfn's tests and `crdfn dev` run against a real Pub/Sub API server that any
// client reaches through PUBSUB_EMULATOR_HOST.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"cloud.google.com/go/pubsub/v2/pstest"
)

// strictlyIncreasingClock returns a clock whose readings never repeat. pstest picks the
// next message of an ordering key by comparing publish times: two messages of one
// Publish call stamped with the same instant would then come out in either order.
func strictlyIncreasingClock() func() time.Time {
	var mu sync.Mutex
	var last time.Time
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if !now.After(last) {
			now = last.Add(time.Nanosecond)
		}
		last = now
		return now
	}
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8085", "host:port to serve the Pub/Sub gRPC API on")
	flag.Parse()

	srv := pstest.NewServerWithAddress(*addr)
	srv.SetTimeNowFunc(strictlyIncreasingClock())
	fmt.Printf("pubsub-emulator (pstest) listening on %s\n", srv.Addr)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	_ = srv.Close()
}
