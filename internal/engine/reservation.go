package engine

import (
	"strconv"
	"strings"
)

// Reservation is how an object reserved by a job names it ("job/<id>"):
// a bare-metal machine's reservation, a COE cluster's status target.
func Reservation(jobID int64) string { return "job/" + strconv.FormatInt(jobID, 10) }

// ReservationJob is the job id of a reservation, 0 if it names none.
func ReservationJob(r string) int64 {
	n, err := strconv.ParseInt(strings.TrimPrefix(r, "job/"), 10, 64)
	if err != nil || !strings.HasPrefix(r, "job/") {
		return 0
	}
	return n
}
