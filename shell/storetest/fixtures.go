package storetest

import (
	"errors"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/internal/testdomain"
)

// The fixture message types of the suite (those of the Conditional AND
// table in the package doc, and more). All
// attributes are indexed, so each is a key a condition or a partition can
// name.
type (
	// DeviceRegistered is "device.registered".
	DeviceRegistered struct {
		DeviceID string `json:"device_id"`
		Name     string `json:"name"`
	}
	// AssetRegistered is "asset.registered".
	AssetRegistered struct {
		AssetID string `json:"asset_id"`
		Label   string `json:"label"`
	}
	// deviceBound is "device.bound".
	deviceBound struct {
		DeviceID string `json:"device_id"`
		AssetID  string `json:"asset_id"`
	}
	// CourseCreated is "course.created".
	CourseCreated struct {
		CourseName string `json:"course_name"`
	}
	// UserRegistered is "user.registered".
	UserRegistered struct {
		UserID string `json:"user_id"`
		Name   string `json:"name"`
	}
	// UserJoinedCourse is "user.joined_course".
	UserJoinedCourse struct {
		CourseName string `json:"course_name"`
		UserID     string `json:"user_id"`
	}
	// CourseClosed is "course.closed".
	CourseClosed struct {
		CourseName string `json:"course_name"`
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
	TypeDeviceRegistered = "device.registered"
	TypeAssetRegistered  = "asset.registered"
	typeDeviceBound      = "device.bound"
	TypeCourseCreated    = "course.created"
	TypeUserRegistered   = "user.registered"
	TypeUserJoinedCourse = "user.joined_course"
	TypeCourseClosed     = "course.closed"
	typeCourseReviewed   = "course.reviewed"
	typeTransfer         = "transfer.made"
	typeReading          = "sensor.read"
	typeSignup           = "user.signed_up"
	typeDeposit          = "account.deposited"
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
// the registry Run hands to the factory.
func NewRegistry() (*codec.Registry, error) {
	reg := codec.NewRegistry()
	err := errors.Join(
		codec.Register[DeviceRegistered](reg, TypeDeviceRegistered),
		codec.Register[AssetRegistered](reg, TypeAssetRegistered),
		codec.Register[deviceBound](reg, typeDeviceBound),
		codec.Register[CourseCreated](reg, TypeCourseCreated),
		codec.Register[UserRegistered](reg, TypeUserRegistered),
		codec.Register[UserJoinedCourse](reg, TypeUserJoinedCourse),
		codec.Register[CourseClosed](reg, TypeCourseClosed),
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
