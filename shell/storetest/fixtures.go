package storetest

import (
	"errors"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/internal/testdomain"
)

// The suite's fixtures that the stores' own tests append too live in
// internal/fixtures; here under names of the suite's own.
type (
	deviceRegistered = fixtures.DeviceRegistered
	assetRegistered  = fixtures.AssetRegistered
	courseCreated    = fixtures.CourseCreated
	userRegistered   = fixtures.UserRegistered
	userJoinedCourse = fixtures.UserJoinedCourse
	courseClosed     = fixtures.CourseClosed
)

const (
	typeDeviceRegistered = fixtures.TypeDeviceRegistered
	typeAssetRegistered  = fixtures.TypeAssetRegistered
	typeCourseCreated    = fixtures.TypeCourseCreated
	typeUserRegistered   = fixtures.TypeUserRegistered
	typeUserJoinedCourse = fixtures.TypeUserJoinedCourse
	typeCourseClosed     = fixtures.TypeCourseClosed
)

// The fixture message types of the suite (those of the Conditional AND
// table in the package doc, and more). All
// attributes are indexed, so each is a key a condition or a partition can
// name.
type (
	// deviceBound is "device.bound".
	deviceBound struct {
		DeviceID string `json:"device_id"`
		AssetID  string `json:"asset_id"`
	}
	// courseReviewed is "course.reviewed": its user_id is optional, and a
	// review without one is indexed under course_name alone.
	courseReviewed struct {
		CourseName string  `json:"course_name"`
		UserID     *string `json:"user_id,omitempty"`
	}
	// transfer is "transfer.made": its accounts attribute holds several
	// values, so a transfer belongs to the partition of each account.
	transfer struct {
		Accounts []string `json:"accounts"`
		Amount   int      `json:"amount"`
	}
	// reading is "sensor.read": non-string attributes, indexed under their
	// canonical strings (codec.Canonical).
	reading struct {
		SensorID string    `json:"sensor_id"`
		Count    int       `json:"count"`
		Active   bool      `json:"active"`
		At       time.Time `json:"at"`
	}
	// signup is "user.signed_up": its email is required, so a signup with
	// an empty email is invalid.
	signup struct {
		Email string `json:"email" sourced:"required"`
	}
	// deposit is "account.deposited": its Validate method rejects an amount
	// that is not positive.
	deposit struct {
		Account string `json:"account"`
		Amount  int    `json:"amount"`
	}
)

// Validate rejects a deposit whose amount is not positive.
func (d deposit) Validate() error {
	if d.Amount <= 0 {
		return codec.FieldError{Field: "amount", Problem: "must be positive"}
	}
	return nil
}

// Type strings of the fixtures.
const (
	typeDeviceBound    = "device.bound"
	typeCourseReviewed = "course.reviewed"
	typeTransfer       = "transfer.made"
	typeReading        = "sensor.read"
	typeSignup         = "user.signed_up"
	typeDeposit        = "account.deposited"
	// typeTicketOpened and typeTicketClosed share the Go type ticket
	// (codec.RegisterAs): messages of it carry their Type.
	typeTicketOpened = "ticket.opened"
	typeTicketClosed = "ticket.closed"
)

// ticket is the payload of two message types, "ticket.opened" and
// "ticket.closed", registered with codec.RegisterAs.
type ticket struct {
	TicketID string `json:"ticket_id"`
}

// NewRegistry returns a registry holding every fixture type of the suite,
// the registry Run hands to the factory. A store's own tests that append
// the suite's messages too take their types from internal/fixtures (the
// repository's stores); the suite exports none.
func NewRegistry() (*codec.Registry, error) {
	reg := codec.NewRegistry()
	err := errors.Join(
		codec.Register[deviceRegistered](reg, typeDeviceRegistered),
		codec.Register[assetRegistered](reg, typeAssetRegistered),
		codec.Register[deviceBound](reg, typeDeviceBound),
		codec.Register[courseCreated](reg, typeCourseCreated),
		codec.Register[userRegistered](reg, typeUserRegistered),
		codec.Register[userJoinedCourse](reg, typeUserJoinedCourse),
		codec.Register[courseClosed](reg, typeCourseClosed),
		codec.Register[courseReviewed](reg, typeCourseReviewed),
		codec.Register[transfer](reg, typeTransfer),
		codec.Register[reading](reg, typeReading),
		codec.Register[signup](reg, typeSignup),
		codec.Register[deposit](reg, typeDeposit),
		codec.RegisterAs[ticket](reg, typeTicketOpened),
		codec.RegisterAs[ticket](reg, typeTicketClosed),
		testdomain.RegisterDecisions(reg),
		registerQueueFixtures(reg),
	)
	if err != nil {
		return nil, err
	}
	return reg, nil
}

// unregistered is a payload type no registry knows.
type unregistered struct {
	Note string `json:"note"`
}
