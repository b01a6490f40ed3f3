package httpexamples

import (
	"testing"

	"github.com/timerq/timerq/internal/workertest"
)

func TestMain(m *testing.M) { workertest.Main(m) }
