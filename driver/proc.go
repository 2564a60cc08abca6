package driver

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The executor kills a task's process group when it stops the task, but not
// when the group's leader exits on its own; DestroyTask finds what is left
// of the group through /proc.

// procStat is the part of /proc/<pid>/stat the driver uses.
type procStat struct {
	State byte
	PGrp  int
	// Start is when the process started, in clock ticks after boot
	// (field 22; 0 when the line is shorter): a pid and its start time
	// name one process, a reused pid another.
	Start uint64
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
	if len(f) < 3 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("proc stat %q: want at least 5 fields", line)
	}
	pg, err := strconv.Atoi(f[5-3])
	if err != nil {
		return procStat{}, fmt.Errorf("proc stat field 5: %w", err)
	}
	st := procStat{State: f[0][0], PGrp: pg}
	if len(f) > 22-3 {
		if st.Start, err = strconv.ParseUint(f[22-3], 10, 64); err != nil {
			return procStat{}, fmt.Errorf("proc stat field 22: %w", err)
		}
	}
	return st, nil
}

// groupMembers lists the live (not zombie) members of process group pgid.
func groupMembers(pgid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readProcStat(pid)
		if err != nil || st.PGrp != pgid || st.State == 'Z' {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}
