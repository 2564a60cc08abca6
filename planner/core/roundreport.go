package core

import "time"

// The report a Reporter gives of its last round (Themis's auction), for
// operators: the live planner shows it in its View and records it in
// Consul (themis/auction/last).

// AppReport is one app's part in a round.
type AppReport struct {
	App string `json:"app"`
	// Rho is the app's ρ if it won nothing this round (ρ_old: its
	// finish-time fairness now); RhoAfter its ρ with what it won (0 when
	// it won nothing).
	Rho      float64 `json:"rho"`
	RhoAfter float64 `json:"rho_after,omitempty"`
	// Bid says whether the app took part in the auction (the 1-f worst
	// off); the others drew leftovers or kept their gangs.
	Bid bool `json:"bid"`
	// Won is the GPUs the app got this round (auction or leftovers),
	// Placed the placement class of the last award, C its partial
	// allocation fraction, and Lease how long it holds them, in seconds.
	Won    int     `json:"won"`
	Placed string  `json:"placed,omitempty"`
	C      float64 `json:"c,omitempty"`
	Lease  float64 `json:"lease_s,omitempty"`
}

// RoundReport is one round's result.
type RoundReport struct {
	At    time.Time   `json:"at"`
	Round uint64      `json:"round"`
	Offer int         `json:"offer_gpus"`
	Apps  []AppReport `json:"apps"`
}
