package e2e

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/themis-nomad/themis/e2e/devstack"
)

// tokenHunt is a task's search for ACL tokens (Nomad's and Consul's are
// UUIDs): its environment, every process's command line and environment it
// can read, and each dir above its task dir, up to /: every readable file
// two levels down (where the dir can be listed) and the dev stack's and
// agents' well-known file names (where it can only be traversed). It
// prints "candidate <where>:<uuid>" for each find.
const tokenHunt = `re='[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'
env | grep -oE "$re" | sed 's/^/candidate env:/'
for p in /proc/[0-9]*; do
  for f in cmdline environ; do
    tr '\0' '\n' < "$p/$f" 2>/dev/null | grep -oE "$re" | sed "s|^|candidate $p/$f:|"
  done
done
d=$(cd "$NOMAD_TASK_DIR" && pwd -P)
while [ "$d" != / ]; do
  d=$(dirname "$d")
  {
    find "$d" -maxdepth 2 \( -path /proc -o -path /sys -o -path /dev -o -path /usr \) -prune -o -type f -size -1024k -readable -print 2>/dev/null | head -5000
    for n in NAMES; do [ -r "$d/$n" ] && echo "$d/$n"; done
  } | sort -u | while IFS= read -r f; do grep -oHsE "$re" "$f" | sed 's/^/candidate /'; done
done
echo "hunt done"
`

// wellKnown are the files a stack or an agent keeps in its dirs, which a
// task tries by name where it cannot list a dir.
var wellKnown = []string{
	"nomad.hcl", "consul.hcl", "nomad-server.hcl", "nomad-client-dev-node.hcl", "nomad.log", "consul.log",
	"dockerd.log", "nomad-server.log", "client/secret-id", "client/client-id", "server/node-id",
	"client.hcl", "server.hcl", "nomad.d/nomad.hcl", "consul.d/consul.hcl",
}

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// A submit-only user's task (examples/acl/user.nomad.hcl, a themis job in
// the team's namespace) on a stack with ACLs on hunts for tokens in its
// environment, in the processes it can see and in every dir above its task
// dir, and finds none that Nomad or Consul accepts. Before: the stack's
// nomad.hcl and consul.hcl were 0644 in a traversable data dir, and the
// task read the management token (and the driver's Consul token) in them.
func TestTaskFindsNoToken(t *testing.T) {
	ctx, cancel := context.WithCancel(env.ctx)
	defer cancel()
	st, dir := aclStack(t, ctx, "token-hunt-")
	tok := st.Tokens()
	admin, _ := apiClients(t, st.NomadAddr(), st.ConsulAddr(), tok.Management)
	nomadCLI(t, st, tok.Management, "namespace", "apply", env.root+"/examples/acl/team.namespace.hcl")
	user := userClient(t, admin, st.NomadAddr())
	p := startThemisPlanner(t, st.NomadAddr(), st.ConsulAddr(), dir, tok.PlannerNomad, tok.PlannerConsul)

	script := strings.Replace(tokenHunt, "NAMES", strings.Join(wellKnown, " "), 1)
	job := trainJob{gpus: 1, shell: script}.build(t, "token-hunt")
	job.Namespace = ptrTo("team")
	if _, _, err := user.Jobs().Register(job, nil); err != nil {
		t.Fatalf("register token-hunt as the user: %v", err)
	}
	out := huntOutput(t, admin, "token-hunt")
	found := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		if where, ok := strings.CutPrefix(line, "candidate "); ok {
			for _, u := range uuidRE.FindAllString(where, -1) {
				if !slices.Contains(found[u], where) {
					found[u] = append(found[u], where)
				}
			}
		}
	}
	t.Logf("the task found %d distinct UUIDs", len(found))
	for u, where := range found {
		if what := acceptedBy(ctx, st, u); what != "" {
			t.Errorf("the task found a token %s accepts in %s", what, strings.Join(where, ", "))
		} else {
			t.Logf("not a token: %s", strings.Join(where, ", "))
		}
	}
	if t.Failed() {
		t.Logf("planner:\n%s", p.output())
	}
}

// huntOutput waits until the job's allocation completes and returns its
// task's stdout, which must end in "hunt done".
func huntOutput(t *testing.T, admin *nomadapi.Client, id string) string {
	t.Helper()
	q := &nomadapi.QueryOptions{Namespace: "team"}
	var out string
	eventually(t, 120*time.Second, id+" complete", func() (bool, error) {
		as, _, err := admin.Jobs().Allocations(id, true, q)
		if err != nil {
			return false, err
		}
		if i := slices.IndexFunc(as, func(a *nomadapi.AllocationListStub) bool { return a.ClientStatus == "failed" }); i >= 0 {
			t.Fatalf("%s's allocation failed: %+v", id, as[i].TaskStates)
		}
		i := slices.IndexFunc(as, func(a *nomadapi.AllocationListStub) bool { return a.ClientStatus == "complete" })
		if i < 0 {
			return false, fmt.Errorf("no complete allocation yet")
		}
		a, _, err := admin.Allocations().Info(as[i].ID, q)
		if err != nil {
			return false, err
		}
		out, err = catStdout(admin, a)
		return err == nil, err
	})
	if !strings.Contains(out, "hunt done") {
		t.Fatalf("the hunt did not finish; stdout:\n%s", out)
	}
	return out
}

// acceptedBy says which of the stack's agents accepts secret as an ACL
// token ("" for none).
func acceptedBy(ctx context.Context, st *devstack.Stack, secret string) string {
	var what []string
	ncfg := nomadapi.DefaultConfig()
	ncfg.Address, ncfg.SecretID = st.NomadAddr(), secret
	if nc, err := nomadapi.NewClient(ncfg); err == nil {
		if tok, _, err := nc.ACLTokens().Self((&nomadapi.QueryOptions{}).WithContext(ctx)); err == nil {
			what = append(what, fmt.Sprintf("Nomad (%s token %q)", tok.Type, tok.Name))
		}
	}
	ccfg := consulapi.DefaultConfig()
	ccfg.Address, ccfg.Token = st.ConsulAddr(), secret
	if c, err := consulapi.NewClient(ccfg); err == nil {
		if tok, _, err := c.ACL().TokenReadSelf((&consulapi.QueryOptions{}).WithContext(ctx)); err == nil {
			what = append(what, fmt.Sprintf("Consul (token %q)", tok.Description))
		}
	}
	return strings.Join(what, " and ")
}
