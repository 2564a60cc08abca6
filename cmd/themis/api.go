package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/planner/consul"
	"github.com/themis-nomad/themis/planner/httpapi"
)

// startAPI serves the planner's HTTP API (planner/httpapi) on o.httpAddr
// until ctx ends; it returns nil (and serves nothing) when the address is
// empty. A standby serves it too and answers 503 naming the leader, which
// it reads from the leader lock.
func startAPI(ctx context.Context, o plannerOptions, ncfg *nomadapi.Config, store *consul.Store, log hclog.Logger) (*httpapi.Server, string, error) {
	if o.httpAddr == "" {
		return nil, "", nil
	}
	var auth httpapi.Authorizer
	if o.httpACL {
		na, err := httpapi.NewNomadAuth(ncfg)
		if err != nil {
			return nil, "", fmt.Errorf("-http-acl: %w", err)
		}
		auth = na
	}
	ln, err := net.Listen("tcp", o.httpAddr)
	if err != nil {
		return nil, "", fmt.Errorf("-http-addr: %w", err)
	}
	api := o.httpAdvertise
	if api == "" {
		api = "http://" + ln.Addr().String()
	}
	srv := httpapi.New(httpapi.Options{
		ID: o.id, API: api, Version: versionString(),
		Leader: func(ctx context.Context) (httpapi.Leader, error) {
			l, ok, err := store.Leader(ctx)
			if err != nil || !ok {
				return httpapi.Leader{}, err
			}
			return httpapi.Leader{ID: l.ID, API: l.API}, nil
		},
		Auth: auth,
	})
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("HTTP API stopped", "error", err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	log.Info("serving the HTTP API", "addr", api, "docs", "docs/api.md")
	return srv, api, nil
}
