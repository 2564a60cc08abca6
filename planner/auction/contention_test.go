package auction

import "testing"

func TestContention(t *testing.T) {
	var c Contention
	c.Set(0, 2)
	m0 := c.Mark(0)
	c.Set(10, 4)
	m10 := c.Mark(10)
	if got := c.Average(m0, 20); !near(got, 3) {
		t.Errorf("N_avg over [0, 20] = %v, want 3", got)
	}
	if got := c.Average(m10, 20); !near(got, 4) {
		t.Errorf("N_avg over [10, 20] = %v, want 4", got)
	}
	if got := c.Average(m10, 10); got != 4 {
		t.Errorf("N_avg at arrival = %v, want the current 4", got)
	}
	c.Set(30, 1)
	if got := c.Average(m0, 40); !near(got, (20+80+10)/40.0) {
		t.Errorf("N_avg over [0, 40] = %v, want %v", got, 110/40.0)
	}
}
