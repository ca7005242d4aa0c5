package testdomain

// The course and enrolment example of the manual, as the tests use it.
// The names a test registers them under are its own (core's tests say
// "courses.enrol_student" where shell's say "courses.enrol").
type (
	// CreateCourse is the command that creates a course under a name no
	// other course holds.
	CreateCourse struct {
		CourseID   string `json:"course_id" sourced:"required"`
		CourseName string `json:"course_name" sourced:"required"`
	}
	// CourseCreated is the event of a created course.
	CourseCreated struct {
		CourseID   string `json:"course_id"`
		CourseName string `json:"course_name"`
	}
	// CourseRenamed is the event of a course's new name.
	CourseRenamed struct {
		CourseID string `json:"course_id"`
		Name     string `json:"name"`
	}
	// EnrolStudent is the command that enrols a student in a course.
	EnrolStudent struct {
		CourseID  string `json:"course_id" sourced:"required"`
		StudentID string `json:"student_id" sourced:"required"`
	}
	// StudentEnrolled is the event of an enrolment.
	StudentEnrolled struct {
		CourseID  string `json:"course_id"`
		StudentID string `json:"student_id"`
	}
	// NotifyStudent is the command that tells a student about a course
	// (the reaction to an enrolment); its course is optional.
	NotifyStudent struct {
		StudentID string `json:"student_id" sourced:"required"`
		CourseID  string `json:"course_id"`
	}
	// StudentNotified is the event of a sent notification.
	StudentNotified struct {
		StudentID string `json:"student_id"`
		CourseID  string `json:"course_id"`
	}
	// SendReminder is the command, scheduled by a reaction, that reminds
	// a course's students of it.
	SendReminder struct {
		CourseID string `json:"course_id"`
	}
	// Reminder is a scheduled message about a course.
	Reminder struct {
		CourseID string `json:"course_id"`
	}
)
