package lua

import _ "embed"

//go:embed recur_prelude.lua
var recurPrelude string

//go:embed recur_load.lua
var recurLoad string

//go:embed recur_arm.lua
var recurArm string

//go:embed recur_put.lua
var recurPut string

// Recurring-schedule scripts, each with prelude.lua and recur_prelude.lua
// prepended. They take one shard's keys and two more of the same shard
// (schedules, sched-due); see recur_prelude.lua.
var (
	// RecurLoad reads schedules and their pending occurrences (recur_load.lua).
	RecurLoad = prelude + recurPrelude + recurLoad
	// RecurArm tops up active schedules with new occurrences (recur_arm.lua).
	RecurArm = prelude + recurPrelude + recurArm
	// RecurPut creates, updates, pauses, resumes or deletes a schedule
	// (recur_put.lua).
	RecurPut = prelude + recurPrelude + recurPut
)

// Overlap applies the schedules' overlap policies to deliveries of one
// consumer group (overlap.lua). It is standalone: no prelude.
//
//go:embed overlap.lua
var Overlap string
