package devstack

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"
)

// Tokens are the ACL tokens of a stack started with Config.ACL: the
// management token of both agents (Consul's initial_management, Nomad's
// bootstrap token), and a token per policy of the policy folder
// (examples/acl; docs/acl.md).
type Tokens struct {
	Management                    string
	PlannerNomad, PlannerConsul   string
	DriverConsul                  string
	OperatorNomad, OperatorConsul string
}

// ACLPolicies are the policy files a stack with ACLs loads, by policy name:
// each <name>.nomad.hcl and <name>.consul.hcl of the policy folder.
var ACLPolicies = []string{"planner", "driver", "operator"}

// Tokens are the stack's ACL tokens; zero without Config.ACL.
func (s *Stack) Tokens() Tokens { return s.tokens }

func newSecret() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// policyDir is the folder of the ACL policy files.
func (c *Config) policyDir() string {
	if c.ACLPolicyDir != "" {
		return c.ACLPolicyDir
	}
	return filepath.Join(filepath.Dir(absPath(c.Templates)), "acl")
}

// consulACL waits until Consul's ACL system answers the management token,
// then creates the Consul policies of the policy folder and a token for
// each (the planner's, the driver's, the operator's), with secrets chosen
// here so that the Nomad config can carry the driver's.
func (s *Stack) consulACL(ctx context.Context) error {
	cfg := consulapi.DefaultConfig()
	cfg.Address = s.ConsulAddr()
	cfg.Token = s.tokens.Management
	c, err := consulapi.NewClient(cfg)
	if err != nil {
		return err
	}
	if err := s.waitFor(ctx, "Consul ACLs with the management token", 60*time.Second, func(ctx context.Context) (bool, error) {
		_, _, err := c.ACL().TokenReadSelf((&consulapi.QueryOptions{}).WithContext(ctx))
		return err == nil, err
	}); err != nil {
		return err
	}
	secrets := map[string]*string{"planner": &s.tokens.PlannerConsul, "driver": &s.tokens.DriverConsul, "operator": &s.tokens.OperatorConsul}
	for _, name := range ACLPolicies {
		rules, err := os.ReadFile(filepath.Join(s.cfg.policyDir(), name+".consul.hcl"))
		if err != nil {
			return fmt.Errorf("devstack: consul policy: %w", err)
		}
		p, _, err := c.ACL().PolicyCreate(&consulapi.ACLPolicy{Name: "themis-" + name, Rules: string(rules),
			Description: "themis " + name + " (examples/acl/" + name + ".consul.hcl)"}, (&consulapi.WriteOptions{}).WithContext(ctx))
		if err != nil {
			return fmt.Errorf("devstack: create consul policy themis-%s: %w", name, err)
		}
		*secrets[name] = newSecret()
		if _, _, err := c.ACL().TokenCreate(&consulapi.ACLToken{SecretID: *secrets[name], Description: "themis " + name,
			Policies: []*consulapi.ACLTokenPolicyLink{{ID: p.ID}}}, (&consulapi.WriteOptions{}).WithContext(ctx)); err != nil {
			return fmt.Errorf("devstack: create consul token themis-%s: %w", name, err)
		}
	}
	return nil
}

// nomadACL bootstraps Nomad's ACLs with the management token, once its
// server leads, then creates the Nomad policies of the policy folder and a
// token for each (the driver has none: it does not call Nomad).
func (s *Stack) nomadACL(ctx context.Context) error {
	cfg := nomadapi.DefaultConfig()
	cfg.Address = s.NomadAddr()
	c, err := nomadapi.NewClient(cfg)
	if err != nil {
		return err
	}
	if err := s.waitFor(ctx, "Nomad ACL bootstrap", 60*time.Second, func(context.Context) (bool, error) {
		_, _, err := c.ACLTokens().BootstrapOpts(s.tokens.Management, nil)
		return err == nil, err
	}); err != nil {
		return err
	}
	c.SetSecretID(s.tokens.Management)
	secrets := map[string]*string{"planner": &s.tokens.PlannerNomad, "operator": &s.tokens.OperatorNomad}
	for _, name := range ACLPolicies {
		path := filepath.Join(s.cfg.policyDir(), name+".nomad.hcl")
		rules, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("devstack: nomad policy: %w", err)
		}
		if _, err := c.ACLPolicies().Upsert(&nomadapi.ACLPolicy{Name: "themis-" + name, Rules: string(rules),
			Description: "themis " + name + " (examples/acl/" + name + ".nomad.hcl)"}, nil); err != nil {
			return fmt.Errorf("devstack: create nomad policy themis-%s: %w", name, err)
		}
		tok, _, err := c.ACLTokens().Create(&nomadapi.ACLToken{Name: "themis " + name, Type: "client", Policies: []string{"themis-" + name}}, nil)
		if err != nil {
			return fmt.Errorf("devstack: create nomad token themis-%s: %w", name, err)
		}
		if p := secrets[name]; p != nil {
			*p = tok.SecretID
		}
	}
	return nil
}

// ConsulPolicy creates a Consul policy from rules and a token with it,
// with the management token, and returns the token's secret: for tests of
// a token that lacks a rule.
func (s *Stack) ConsulPolicy(ctx context.Context, name, rules string) (string, error) {
	cfg := consulapi.DefaultConfig()
	cfg.Address = s.ConsulAddr()
	cfg.Token = s.tokens.Management
	c, err := consulapi.NewClient(cfg)
	if err != nil {
		return "", err
	}
	p, _, err := c.ACL().PolicyCreate(&consulapi.ACLPolicy{Name: name, Rules: rules}, (&consulapi.WriteOptions{}).WithContext(ctx))
	if err != nil {
		return "", err
	}
	t, _, err := c.ACL().TokenCreate(&consulapi.ACLToken{Policies: []*consulapi.ACLTokenPolicyLink{{ID: p.ID}}}, (&consulapi.WriteOptions{}).WithContext(ctx))
	if err != nil {
		return "", err
	}
	return t.SecretID, nil
}
