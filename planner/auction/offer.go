package auction

import (
	"fmt"
	"slices"
	"sort"
)

// Machine is one machine's GPUs in an offer.
type Machine struct {
	ID   string
	Rack string
	// Free lists the machine's GPUs up for auction, in the order to take
	// them (OfferFromNodes puts GPUs that share topology cells together).
	Free []string
}

// Offer is the set of free GPUs an auction round sells (section 4.2.2,
// step 2): GPUs grouped by machine and machines by rack.
type Offer struct {
	Machines []Machine
}

// GPUs is the number of GPUs in the offer.
func (o Offer) GPUs() int {
	n := 0
	for _, m := range o.Machines {
		n += len(m.Free)
	}
	return n
}

// Validate reports duplicate machines or GPUs and machines without an ID.
func (o Offer) Validate() error {
	machines, gpus := map[string]bool{}, map[string]bool{}
	for _, m := range o.Machines {
		if m.ID == "" {
			return fmt.Errorf("offer: machine without an ID")
		}
		if machines[m.ID] {
			return fmt.Errorf("offer: machine %s listed twice", m.ID)
		}
		machines[m.ID] = true
		for _, g := range m.Free {
			if g == "" || gpus[g] {
				return fmt.Errorf("offer: machine %s: GPU %q empty or listed twice", m.ID, g)
			}
			gpus[g] = true
		}
	}
	return nil
}

// pool is the part of an offer not yet handed out: per machine, the GPUs
// left, in offer order.
type pool struct {
	machines []poolMachine
	racks    []string
	rackFree []int
	free     int
	where    map[string][2]int // GPU -> machine index, position in all
}

type poolMachine struct {
	id   string
	rack int
	all  []string // the machine's offered GPUs, in offer order
	left []bool   // which of all are still free
	n    int      // how many are
}

func newPool(o Offer) *pool {
	p := &pool{where: map[string][2]int{}}
	rackIdx := map[string]int{}
	for _, m := range o.Machines {
		r, ok := rackIdx[m.Rack]
		if !ok {
			r = len(p.racks)
			rackIdx[m.Rack] = r
			p.racks = append(p.racks, m.Rack)
			p.rackFree = append(p.rackFree, 0)
		}
		pm := poolMachine{id: m.ID, rack: r, all: m.Free, left: make([]bool, len(m.Free))}
		for i, g := range m.Free {
			pm.left[i] = true
			p.where[g] = [2]int{len(p.machines), i}
		}
		pm.n = len(m.Free)
		p.rackFree[r] += pm.n
		p.free += pm.n
		p.machines = append(p.machines, pm)
	}
	return p
}

// caps is the largest allocation of each class the pool can hold: the most
// free GPUs on one machine, in one rack, and in all.
func (p *pool) caps() [NumClasses]int {
	var c [NumClasses]int
	for _, m := range p.machines {
		c[SameMachine] = max(c[SameMachine], m.n)
	}
	for _, f := range p.rackFree {
		c[SameRack] = max(c[SameRack], f)
	}
	c[CrossRack] = p.free
	return c
}

// takeFrom removes n free GPUs of machine i, first in offer order.
func (p *pool) takeFrom(i, n int) []string {
	m := &p.machines[i]
	out := make([]string, 0, n)
	for pos := 0; pos < len(m.all) && len(out) < n; pos++ {
		if m.left[pos] {
			m.left[pos] = false
			out = append(out, m.all[pos])
		}
	}
	m.n -= len(out)
	p.rackFree[m.rack] -= len(out)
	p.free -= len(out)
	return out
}

// give returns GPUs to the pool.
func (p *pool) give(gpus []string) {
	for _, g := range gpus {
		w, ok := p.where[g]
		if !ok {
			continue
		}
		m := &p.machines[w[0]]
		if pos := w[1]; !m.left[pos] {
			m.left[pos] = true
			m.n++
			p.rackFree[m.rack]++
			p.free++
		}
	}
}

// bundle is GPUs taken for one allocation, by machine.
type bundle struct {
	parts []part
	n     int
}

type part struct {
	machine int
	gpus    []string
}

func (b bundle) gpus() []string {
	out := make([]string, 0, b.n)
	for _, pt := range b.parts {
		out = append(out, pt.gpus...)
	}
	return out
}

// class is how spread the bundle is.
func (p *pool) class(b bundle) Class {
	if len(b.parts) <= 1 {
		return SameMachine
	}
	r := p.machines[b.parts[0].machine].rack
	for _, pt := range b.parts[1:] {
		if p.machines[pt.machine].rack != r {
			return CrossRack
		}
	}
	return SameRack
}

// place takes k GPUs of class c or better, or reports false and takes
// nothing. One machine: the machine with the fewest free GPUs that holds k
// (best fit keeps emptier machines whole for larger gangs). One rack: the
// rack with the fewest free GPUs that holds k, its fullest machines first
// (as few machines as possible) until one machine holds the rest, which
// then comes from the machine with the fewest free GPUs that holds it.
// Across racks: a rack if one holds k, else the fullest racks first, each
// taken the same way.
func (p *pool) place(k int, c Class) (bundle, bool) {
	if k <= 0 || k > p.free {
		return bundle{}, false
	}
	if c == SameMachine {
		best := -1
		for i, m := range p.machines {
			if m.n >= k && (best < 0 || m.n < p.machines[best].n) {
				best = i
			}
		}
		if best < 0 {
			return bundle{}, false
		}
		return bundle{parts: []part{{best, p.takeFrom(best, k)}}, n: k}, true
	}
	bestRack := -1
	for r, f := range p.rackFree {
		if f >= k && (bestRack < 0 || f < p.rackFree[bestRack]) {
			bestRack = r
		}
	}
	var racks []int
	switch {
	case bestRack >= 0:
		racks = []int{bestRack}
	case c == SameRack:
		return bundle{}, false
	default:
		for r := range p.racks {
			racks = append(racks, r)
		}
		sort.SliceStable(racks, func(a, b int) bool { return p.rackFree[racks[a]] > p.rackFree[racks[b]] })
	}
	var b bundle
	for _, r := range racks {
		var ms []int
		for i, m := range p.machines {
			if m.rack == r && m.n > 0 {
				ms = append(ms, i)
			}
		}
		sort.SliceStable(ms, func(a, b int) bool { return p.machines[ms[a]].n > p.machines[ms[b]].n })
		for len(ms) > 0 && b.n < k {
			// The fullest machine, or the one with the fewest free GPUs
			// that holds the rest (best fit: as few machines, and the
			// fuller machines stay whole).
			at := 0
			for x := len(ms) - 1; x >= 0; x-- {
				if p.machines[ms[x]].n >= k-b.n {
					at = x
					break
				}
			}
			i := ms[at]
			ms = slices.Delete(ms, at, at+1)
			g := p.takeFrom(i, min(k-b.n, p.machines[i].n))
			b.parts = append(b.parts, part{i, g})
			b.n += len(g)
		}
		if b.n == k {
			break
		}
	}
	return b, true
}

// takeExact takes exactly the given GPUs, when every one is still free,
// as one bundle; otherwise it takes nothing.
func (p *pool) takeExact(gpus []string) (bundle, bool) {
	for i, g := range gpus {
		w, ok := p.where[g]
		if !ok || !p.machines[w[0]].left[w[1]] || slices.Contains(gpus[:i], g) {
			return bundle{}, false
		}
	}
	var b bundle
	for _, g := range gpus {
		w := p.where[g]
		m := &p.machines[w[0]]
		m.left[w[1]] = false
		m.n--
		p.rackFree[m.rack]--
		p.free--
		if k := len(b.parts) - 1; k >= 0 && b.parts[k].machine == w[0] {
			b.parts[k].gpus = append(b.parts[k].gpus, g)
		} else {
			b.parts = append(b.parts, part{machine: w[0], gpus: []string{g}})
		}
		b.n++
	}
	return b, b.n > 0
}

// placeAtBest places k GPUs at class c, or at the next worse class that
// the pool allows.
func (p *pool) placeAtBest(k int, c Class) (bundle, bool) {
	for ; int(c) < NumClasses; c++ {
		if b, ok := p.place(k, c); ok {
			return b, true
		}
	}
	return bundle{}, false
}

// splitGangs assigns each job's gang whole to GPUs of the bundle: the
// largest gangs first, each on the bundle's machine with the fewest GPUs
// left that holds it, else over the bundle's fullest machines. Gangs add up
// to at most the bundle's GPUs; what they leave is returned.
func splitGangs(b bundle, gangs []int) (perJob [][]string, rest []string) {
	left := make([][]string, len(b.parts))
	for i, pt := range b.parts {
		left[i] = pt.gpus
	}
	order := make([]int, len(gangs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, c int) bool { return gangs[order[a]] > gangs[order[c]] })
	perJob = make([][]string, len(gangs))
	for _, j := range order {
		g := gangs[j]
		if g == 0 {
			continue
		}
		best := -1
		for i := range left {
			if len(left[i]) >= g && (best < 0 || len(left[i]) < len(left[best])) {
				best = i
			}
		}
		if best >= 0 {
			perJob[j] = append([]string(nil), left[best][:g]...)
			left[best] = left[best][g:]
			continue
		}
		ms := make([]int, len(left))
		for i := range ms {
			ms[i] = i
		}
		sort.SliceStable(ms, func(a, c int) bool { return len(left[ms[a]]) > len(left[ms[c]]) })
		for _, i := range ms {
			n := min(g-len(perJob[j]), len(left[i]))
			perJob[j] = append(perJob[j], left[i][:n]...)
			left[i] = left[i][n:]
		}
	}
	for _, l := range left {
		rest = append(rest, l...)
	}
	return perJob, rest
}
