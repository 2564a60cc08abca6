// Package trace loads job traces for the simulator ("themis sim --trace
// FILE"): which jobs arrive when, how many GPUs each gang needs, how long it
// runs at full speed and which virtual cluster (VC) it belongs to.
//
// The format is detected from the CSV header; column order does not matter,
// but the set of columns must match one format exactly:
//
//	philly    timestamp,duration,num_gpus,gpu_time,cluster
//	tiresias  job_id,num_gpu,submit_time,iterations,model_name,duration,interval
//
// Philly (the Microsoft Philly trace as published in the Pollux artifact):
// timestamp is the submission time, "YYYY-MM-DD hh:mm:ss" in UTC; duration is
// in seconds; cluster is the virtual cluster id. Rows need not be sorted. A
// job's ID is "philly-<line>", its line in the file, which is stable as long
// as the file is. gpu_time is not read: it is derived data
// (duration × num_gpus, up to rounding in the source) and the simulator
// recomputes what it needs from duration and num_gpus, so a mismatch is
// ignored rather than rejected. Trace.Start is the earliest timestamp.
//
// Tiresias (the Tiresias simulator's job files): submit_time and duration are
// in seconds; job_id must be unique and becomes the job's ID; every job is in
// VC "default"; model_name and iterations are kept. interval (the gap to the
// previous arrival) is redundant with submit_time and not read. The format has
// no absolute time, so Trace.Start is the zero time.
//
// In both formats Submit is re-based so that the earliest submission is 0, and
// Jobs are sorted by Submit, ties by file line. Zero-duration jobs are
// accepted (Philly has jobs that ended at once; the simulator finishes them on
// arrival). Rejected, with an error naming the file, the line and the column
// (LineError): a wrong column count, GPU counts that are not positive whole
// numbers, negative durations or submit times, NaN or infinite numbers, an
// unparseable timestamp, an empty VC or job id, duplicate Tiresias job ids.
// Blank lines are skipped; fields may be surrounded by spaces; CRLF line
// ends and a UTF-8 byte-order mark are accepted.
//
// LoadSizes reads a job-size distribution (the Tiresias simulator's
// yarn-gput*.csv files: header "duration", one GPU-time sample in seconds a
// line), which 2D-Gittins uses as its prior.
package trace
