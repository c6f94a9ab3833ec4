// A tiny HTTP server for the real-node e2e test (a static binary in a one-file image).
//
//	/healthz  200 once the Secret volume's file can be read (the readiness probe)
//	/         what the pod sees: its UID, the Secret's value, whether the root is writable
package main

import (
	"fmt"
	"net/http"
	"os"
)

func main() {
	secret := os.Getenv("SECRET_FILE")
	http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if _, err := os.ReadFile(secret); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		value, err := os.ReadFile(secret)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writable := "yes"
		if f, err := os.Create("/written-by-pod"); err != nil {
			writable = "no: " + err.Error()
		} else {
			f.Close()
		}
		host, _ := os.Hostname()
		fmt.Fprintf(w, "uid=%d\nhostname=%s\nsecret=%s\nroot-writable=%s\n", os.Getuid(), host, value, writable)
	})
	addr := ":" + os.Getenv("PORT")
	if err := http.ListenAndServe(addr, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
