// N_avg: the time-weighted number of active apps since an app arrived.

package auction

// Contention tracks N, the number of active apps, over time, so that each
// app's N_avg (Equation 1) is the time-weighted average of N since it
// arrived. Times are seconds on any clock that never goes back.
type Contention struct {
	t, area float64
	n       int
	started bool
}

// Set records that n apps are active from time t on. The same n again
// changes nothing (the integral runs on from when it last changed), so
// observing it every second or once gives the same N_avg, to the bit.
func (c *Contention) Set(t float64, n int) {
	if c.started {
		if n == c.n {
			return
		}
		c.area = c.Area(t)
	}
	c.t, c.n, c.started = max(t, c.t), n, true
}

// Area is the integral of N from the first Set to t.
func (c *Contention) Area(t float64) float64 {
	if !c.started || t <= c.t {
		return c.area
	}
	return c.area + float64(c.n)*(t-c.t)
}

// Mark is a point to average from: keep one per app, taken when it arrives.
type Mark struct{ T, Area float64 }

// Mark returns the current point for averaging from time t.
func (c *Contention) Mark(t float64) Mark { return Mark{t, c.Area(t)} }

// Average is N_avg over [m.T, t]; at m.T itself it is the current N.
func (c *Contention) Average(m Mark, t float64) float64 {
	if t <= m.T {
		return float64(c.n)
	}
	return (c.Area(t) - m.Area) / (t - m.T)
}

// ContentionState is a Contention as data, for a policy that records its
// state between rounds (arbiter.Policy.ExportState).
type ContentionState struct {
	T       float64 `json:"t"`
	Area    float64 `json:"area"`
	N       int     `json:"n"`
	Started bool    `json:"started"`
}

// State returns c as data.
func (c *Contention) State() ContentionState {
	return ContentionState{T: c.t, Area: c.area, N: c.n, Started: c.started}
}

// ContentionFrom rebuilds a Contention from its State.
func ContentionFrom(s ContentionState) Contention {
	return Contention{t: s.T, area: s.Area, n: s.N, started: s.Started}
}
