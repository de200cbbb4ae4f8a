package parser

// Method identifies a request method. Methods are case-sensitive
// (RFC 3261 7.1): "invite" is an extension method, not INVITE.
type Method uint8

// Known methods; MethodOther is any extension method (see Message.MethodBytes).
const (
	MethodOther Method = iota
	MethodInvite
	MethodAck
	MethodBye
	MethodCancel
	MethodOptions
	MethodRegister
	MethodPrack
	MethodSubscribe
	MethodNotify
	MethodPublish
	MethodInfo
	MethodRefer
	MethodMessage
	MethodUpdate
	NumMethods // one more than the largest Method, for arrays indexed by Method
)

var methodNames = [NumMethods]string{
	MethodOther:     "",
	MethodInvite:    "INVITE",
	MethodAck:       "ACK",
	MethodBye:       "BYE",
	MethodCancel:    "CANCEL",
	MethodOptions:   "OPTIONS",
	MethodRegister:  "REGISTER",
	MethodPrack:     "PRACK",
	MethodSubscribe: "SUBSCRIBE",
	MethodNotify:    "NOTIFY",
	MethodPublish:   "PUBLISH",
	MethodInfo:      "INFO",
	MethodRefer:     "REFER",
	MethodMessage:   "MESSAGE",
	MethodUpdate:    "UPDATE",
}

// String returns the method name, or "" for MethodOther.
func (m Method) String() string { return methodNames[m] }

// LookupMethod returns the Method for a method token (case-sensitive).
func LookupMethod(b []byte) Method {
	// A switch on constant strings compiles to length checks and inline
	// word compares: no loop, no call.
	switch string(b) {
	case "INVITE":
		return MethodInvite
	case "ACK":
		return MethodAck
	case "BYE":
		return MethodBye
	case "CANCEL":
		return MethodCancel
	case "OPTIONS":
		return MethodOptions
	case "REGISTER":
		return MethodRegister
	case "PRACK":
		return MethodPrack
	case "SUBSCRIBE":
		return MethodSubscribe
	case "NOTIFY":
		return MethodNotify
	case "PUBLISH":
		return MethodPublish
	case "INFO":
		return MethodInfo
	case "REFER":
		return MethodRefer
	case "MESSAGE":
		return MethodMessage
	case "UPDATE":
		return MethodUpdate
	}
	return MethodOther
}
