package httpapi

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"sync"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
)

// NomadAuth resolves callers' tokens through Nomad (an Authorizer): the
// token itself through /v1/acl/token/self (a management token reads every
// namespace), then, for a client token, the namespaces Nomad lists to it
// (/v1/namespaces), each kept where the token may list its jobs
// (/v1/jobs?namespace=NS answers it). Where Nomad's ACLs are disabled,
// every caller reads every namespace, as Nomad's own API would let it. An
// answer is kept TTL per token (by its hash), so a revoked token reads on
// for at most that long.
type NomadAuth struct {
	// API is Nomad's API client (its address and TLS) and must carry no
	// token of its own: a caller without a token would be asked about as
	// that token (NewNomadAuth makes one).
	API *nomadapi.Client
	TTL time.Duration

	mu    sync.Mutex
	cache map[[sha256.Size]byte]authEntry
}

type authEntry struct {
	sc  Scope
	err error
	at  time.Time
}

// NewNomadAuth is a NomadAuth asking the Nomad of cfg (its address and
// TLS, never its token: cfg is copied without it).
func NewNomadAuth(cfg *nomadapi.Config) (*NomadAuth, error) {
	c := *cfg
	c.SecretID = ""
	api, err := nomadapi.NewClient(&c)
	if err != nil {
		return nil, err
	}
	return &NomadAuth{API: api}, nil
}

// DefaultAuthTTL is how long NomadAuth keeps a token's answer.
const DefaultAuthTTL = 30 * time.Second

// maxAuthEntries bounds the tokens NomadAuth keeps answers for.
const maxAuthEntries = 4096

// Scope implements Authorizer.
func (a *NomadAuth) Scope(ctx context.Context, token string) (Scope, error) {
	ttl := a.TTL
	if ttl <= 0 {
		ttl = DefaultAuthTTL
	}
	h := sha256.Sum256([]byte(token))
	a.mu.Lock()
	e, ok := a.cache[h]
	a.mu.Unlock()
	if ok && time.Since(e.at) < ttl {
		return e.sc, e.err
	}
	sc, err := a.resolve(ctx, token)
	if ctx.Err() != nil {
		return sc, err // the caller went away: nothing learnt
	}
	a.mu.Lock()
	if a.cache == nil || len(a.cache) >= maxAuthEntries {
		a.cache = map[[sha256.Size]byte]authEntry{}
	}
	a.cache[h] = authEntry{sc: sc, err: err, at: time.Now()}
	a.mu.Unlock()
	return sc, err
}

// resolve asks Nomad what token may read.
func (a *NomadAuth) resolve(ctx context.Context, token string) (Scope, error) {
	q := (&nomadapi.QueryOptions{AuthToken: token}).WithContext(ctx)
	self, _, err := a.API.ACLTokens().Self(q)
	switch {
	case err != nil && strings.Contains(err.Error(), "ACL support disabled"):
		return Scope{All: true}, nil
	case err != nil && token == "":
		return Scope{}, fmt.Errorf("no token given, and Nomad's anonymous token reads no namespace here: %v", err)
	case err != nil:
		return Scope{}, fmt.Errorf("Nomad does not accept the token: %v", err)
	case self == nil:
		return Scope{}, fmt.Errorf("Nomad answered no token")
	case self.Type == "management":
		return Scope{All: true}, nil
	}
	nss, _, err := a.API.Namespaces().List(q)
	if err != nil {
		return Scope{}, fmt.Errorf("list the token's namespaces in Nomad: %v", err)
	}
	sc := Scope{Namespaces: map[string]bool{}}
	for _, ns := range nss {
		jq := (&nomadapi.QueryOptions{AuthToken: token, Namespace: ns.Name, PerPage: 1}).WithContext(ctx)
		if _, _, err := a.API.Jobs().List(jq); err == nil {
			sc.Namespaces[ns.Name] = true
		}
	}
	return sc, nil
}
