package consul

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"

	"github.com/themis-nomad/themis/planner/aclhint"
	"github.com/themis-nomad/themis/planner/lease"
)

// How a dead leader is noticed. Each planner, leader or standby, registers
// a service instance (PlannerService) with a TTL check on its Consul agent
// and passes the check every heartbeatEvery; its session is bound to that
// check (and to the agent's serfHealth). A planner killed with SIGKILL stops
// passing it: LivenessTTL later the check is critical, Consul invalidates
// the session at once and releases the lock, and a standby, blocked on the
// lock key, takes it. (A session's own TTL cannot do this quickly: Consul
// enforces at least 10 s and may wait twice the TTL before it acts; with
// the lock delay the old 15 s session took a standby 38-44 s to lead.)
const (
	// PlannerService is the Consul service the planners register.
	PlannerService = "themis-planner"
	// LivenessTTL is how long after a planner's last heartbeat its
	// session, and the leader lock with it, goes.
	LivenessTTL    = 3 * time.Second
	heartbeatEvery = time.Second
	// lockDelay is how long Consul keeps the lock from being taken after
	// the leader's session went. Consul's default is 15 s, meant for
	// holders that cannot be fenced; the planner's writes are (fence.go), so
	// the delay only postpones the standby.
	lockDelay = time.Millisecond
	// fallbackSessionTTL is the session TTL where the planner may not
	// register its service (an ACL policy without the service rule): the
	// lock then outlives a killed leader by up to twice this plus Consul's
	// default lock delay.
	fallbackSessionTTL = "15s"
)

// LeaderInfo is what the leader lock's value records (JSON): the leading
// planner's identity and, when it serves the HTTP API, the API's address,
// so that a standby can name it.
type LeaderInfo struct {
	ID  string `json:"id"`
	API string `json:"api,omitempty"`
}

// Lead blocks until this planner holds the leader lock (or ctx ends), then
// returns a context that is cancelled when leadership is lost, and a func
// that releases the lock.
func (s *Store) Lead(ctx context.Context, identity string) (context.Context, func(), error) {
	return s.LeadAs(ctx, LeaderInfo{ID: identity}, hclog.NewNullLogger())
}

// LeadAs is Lead recording the planner's API address too. While it leads,
// the Store's writes are fenced by its session (fence.go).
func (s *Store) LeadAs(ctx context.Context, me LeaderInfo, log hclog.Logger) (context.Context, func(), error) {
	value, err := json.Marshal(me)
	if err != nil {
		return nil, nil, err
	}
	live, err := s.liveness(ctx, me.ID, log)
	if err != nil {
		return nil, nil, err
	}
	opts := &api.LockOptions{
		Key:            lease.LeaderKey,
		Value:          value,
		SessionName:    "themis-planner " + me.ID,
		SessionTTL:     fallbackSessionTTL,
		MonitorRetries: 5,
	}
	if live != nil {
		opts.Session = live.session
	}
	lock, err := s.api.LockOpts(opts)
	if err != nil {
		live.stop()
		return nil, nil, fmt.Errorf("leader lock %s: %w", lease.LeaderKey, err)
	}
	lost, err := lock.Lock(ctx.Done())
	if err != nil {
		live.stop()
		return nil, nil, aclhint.Wrap(fmt.Errorf("acquire leader lock %s: %w", lease.LeaderKey, err), "Consul",
			"the leader lock (a session, then "+lease.LeaderKey+")",
			`session_prefix "" { policy = "write" } and key "`+lease.LeaderKey+`" { policy = "write" }`, PlannerPolicy)
	}
	if lost == nil {
		live.stop()
		return nil, nil, ctx.Err()
	}
	if live != nil {
		s.fence.lead(live.session)
	} else if kv, _, err := s.api.KV().Get(lease.LeaderKey, (&api.QueryOptions{}).WithContext(ctx)); err == nil && kv != nil {
		s.fence.lead(kv.Session) // the session api.Lock made
	}
	lctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-lost:
		case <-lctx.Done():
		}
		s.fence.depose()
		cancel()
	}()
	return lctx, func() { cancel(); s.fence.depose(); _ = lock.Unlock(); live.stop() }, nil
}

// livenessCheck is a planner's registration, check and session (above).
type livenessCheck struct {
	api              *api.Client
	service, session string
	done             chan struct{}
}

// liveness registers the planner's service with its TTL check, starts the
// heartbeat and makes the session bound to the check. Where the token may
// not register the service it logs why and returns nil: the lock then uses
// a plain TTL session, and a standby takes over in tens of seconds.
func (s *Store) liveness(ctx context.Context, id string, log hclog.Logger) (*livenessCheck, error) {
	service := PlannerService + "-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, id)
	check := service + "-alive"
	err := s.api.Agent().ServiceRegisterOpts(&api.AgentServiceRegistration{
		ID:   service,
		Name: PlannerService,
		Meta: map[string]string{"planner_id": id},
		Checks: api.AgentServiceChecks{{
			CheckID: check, Name: "themis planner heartbeat", TTL: LivenessTTL.String(),
			Status: api.HealthPassing, DeregisterCriticalServiceAfter: "1m",
		}},
	}, api.ServiceRegisterOpts{}.WithContext(ctx))
	if err != nil {
		if aclhint.Denied(err) {
			log.Warn("cannot register the planner's liveness check: a standby will take over from a killed leader only after its session TTL (up to 30 s) and Consul's lock delay (15 s)",
				"missing_rule", `service "`+PlannerService+`" { policy = "write" }`, "policy", PlannerPolicy, "error", err)
			return nil, nil
		}
		return nil, fmt.Errorf("register the planner's liveness check %s: %w", check, err)
	}
	l := &livenessCheck{api: s.api, service: service, done: make(chan struct{})}
	go l.heartbeat(check, log)
	session, _, err := s.api.Session().Create(&api.SessionEntry{
		Name:          "themis-planner " + id,
		Behavior:      api.SessionBehaviorRelease,
		LockDelay:     lockDelay,
		NodeChecks:    []string{"serfHealth"},
		ServiceChecks: []api.ServiceCheck{{ID: check}},
	}, (&api.WriteOptions{}).WithContext(ctx))
	if err != nil {
		l.stop()
		return nil, aclhint.Wrap(fmt.Errorf("create the planner's session: %w", err), "Consul", "a session for the leader lock",
			`session_prefix "" { policy = "write" }`, PlannerPolicy)
	}
	l.session = session
	return l, nil
}

// heartbeat passes the check every heartbeatEvery until stop.
func (l *livenessCheck) heartbeat(check string, log hclog.Logger) {
	t := time.NewTicker(heartbeatEvery)
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-t.C:
			if err := l.api.Agent().UpdateTTL(check, "", api.HealthPassing); err != nil {
				log.Warn("cannot pass the planner's liveness check", "check", check, "error", err)
			}
		}
	}
}

// stop ends the heartbeat, destroys the session and deregisters the
// service; nil is a no-op.
func (l *livenessCheck) stop() {
	if l == nil {
		return
	}
	select {
	case <-l.done:
		return
	default:
	}
	close(l.done)
	if l.session != "" {
		_, _ = l.api.Session().Destroy(l.session, nil)
	}
	_ = l.api.Agent().ServiceDeregister(l.service)
}

// Leader reads who holds the leader lock; ok is false when nobody does. A
// value that is not LeaderInfo's JSON (an older planner's) is its identity.
func (s *Store) Leader(ctx context.Context) (l LeaderInfo, ok bool, err error) {
	kv, _, err := s.api.KV().Get(lease.LeaderKey, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return LeaderInfo{}, false, fmt.Errorf("read leader lock %s: %w", lease.LeaderKey, err)
	}
	if kv == nil || kv.Session == "" {
		return LeaderInfo{}, false, nil
	}
	if json.Unmarshal(kv.Value, &l) != nil || l.ID == "" {
		l = LeaderInfo{ID: string(kv.Value)}
	}
	return l, true, nil
}
