package driver

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of the times in /proc/<pid>/stat. Linux
// exposes 100 to user space on every architecture Nomad supports.
const clockTicks = 100

// procStat is the part of /proc/<pid>/stat the driver uses.
type procStat struct {
	State     byte
	PGrp      int
	UTime     uint64 // clock ticks
	STime     uint64 // clock ticks
	StartTime uint64 // clock ticks after boot; with the pid, identifies a process
	RSSPages  uint64
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(string(b))
}

// parseProcStat parses a /proc/<pid>/stat line. The command name may hold
// spaces and parentheses, so fields are counted from the last ')'.
func parseProcStat(line string) (procStat, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("proc stat %q: no command name", line)
	}
	f := strings.Fields(line[i+1:])
	// f[0] is field 3 (state) of proc(5); field n is f[n-3].
	if len(f) < 22 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("proc stat %q: want at least 24 fields", line)
	}
	var st procStat
	st.State = f[0][0]
	nums := []struct {
		field int
		dst   *uint64
	}{{14, &st.UTime}, {15, &st.STime}, {22, &st.StartTime}, {24, &st.RSSPages}}
	for _, n := range nums {
		v, err := strconv.ParseUint(f[n.field-3], 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("proc stat field %d: %w", n.field, err)
		}
		*n.dst = v
	}
	pg, err := strconv.Atoi(f[5-3])
	if err != nil {
		return procStat{}, fmt.Errorf("proc stat field 5: %w", err)
	}
	st.PGrp = pg
	return st, nil
}

// groupUsage sums CPU time and RSS over the live members of process group
// pgid. ok is false when no member was found.
type groupUsage struct {
	Pids     []int
	UTicks   uint64
	STicks   uint64
	RSSBytes uint64
}

func readGroupUsage(pgid int) (groupUsage, bool) {
	var u groupUsage
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return u, false
	}
	page := uint64(os.Getpagesize())
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readProcStat(pid)
		if err != nil || st.PGrp != pgid || st.State == 'Z' {
			continue
		}
		u.Pids = append(u.Pids, pid)
		u.UTicks += st.UTime
		u.STicks += st.STime
		u.RSSBytes += st.RSSPages * page
	}
	return u, len(u.Pids) > 0
}
