package e2e

import (
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
)

// Job types and Nomad priorities against real agents (docs/adversary.md,
// "Job types, Nomad priorities and docker shapes"): a themis job of type
// "system" at Nomad priority 100, a launch of a periodic themis job (forced, as Nomad's
// periodic dispatcher launches them) and a second group without devices
// are rejected naming their rule and never placed; a good job that asks
// Nomad for priority 100 runs, pinned at priority 50.
func TestAdversaryJobTypesAndPriority(t *testing.T) {
	system := helloJob(t, "e2e-adv-system", 50, 1)
	system.Type, system.Priority = ptrTo("system"), ptrTo(100)
	system.TaskGroups[0].ReschedulePolicy = nil // Nomad takes none for system jobs
	register(t, system)

	periodic := helloJob(t, "e2e-adv-periodic", 50, 1)
	periodic.Periodic = &nomadapi.PeriodicConfig{Enabled: ptrTo(true), Spec: ptrTo("0 0 1 1 *"), SpecType: ptrTo("cron"), ProhibitOverlap: ptrTo(false)}
	register(t, periodic)
	child, _, err := env.nomad.Jobs().PeriodicForce(*periodic.ID, nil)
	if err != nil {
		t.Fatalf("force a launch of the periodic job: %v", err)
	}
	var launch string
	eventually(t, 10*time.Second, "the periodic job's launch", func() (bool, error) {
		stubs, _, err := env.nomad.Jobs().PrefixList(*periodic.ID + "/periodic-")
		if err != nil || len(stubs) == 0 {
			return false, err
		}
		launch = stubs[0].ID
		return true, nil
	})
	t.Cleanup(func() { _, _, _ = env.nomad.Jobs().Deregister(launch, true, nil) })
	_ = child

	second := helloJob(t, "e2e-adv-second-plain-group", 50, 1)
	side := rawExecJob(t, "e2e-adv-side-plain", 50, nil).TaskGroups[0]
	side.Name = ptrTo("side")
	second.TaskGroups = append(second.TaskGroups, side)
	register(t, second)

	const good = "e2e-adv-priority-100"
	job := helloJob(t, good, 30, 1)
	job.Priority = ptrTo(100)
	register(t, job)
	eventually(t, 60*time.Second, good+" pinned", func() (bool, error) {
		j, _, err := env.nomad.Jobs().Info(good, nil)
		if err != nil {
			return false, err
		}
		if j.Meta["themis.lease_id"] == "" {
			return false, nil
		}
		if p := *j.Priority; p != 50 {
			t.Fatalf("the pinned job's Nomad priority is %d, want 50 (it asked for 100)", p)
		}
		return true, nil
	})
	waitDead(t, good, 90*time.Second)

	checkRejectedUnplaced(t, env.nomad, env.consul, *system.ID, []string{`type = "system"`, `a themis job is "batch" or "service"`})
	checkRejectedUnplaced(t, env.nomad, env.consul, launch, []string{`a launch of periodic job "e2e-adv-periodic"`})
	checkRejectedUnplaced(t, env.nomad, env.consul, *second.ID, []string{`group "side": a themis job has one group`})
}
