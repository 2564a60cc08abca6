package trace

import (
	"strings"
	"testing"
)

func FuzzParse(f *testing.F) {
	f.Add(phillyHeader + "\n2017-10-09 07:01:55,66.0,1,66.0,11cb48\n2017-10-09 06:13:03,2951.0,4,2951.0,6214e9\n")
	f.Add(phillyHeader + "\r\n2017-10-09 07:01:55,0,2.0,1,vc\r\n\r\n")
	f.Add("cluster,gpu_time,num_gpus,duration,timestamp\nvc,1,1,1,2017-10-09 07:01:55")
	f.Add(tiresiasHeader + "\n0,1,0,606,vgg19,164,30\n1,8,30,133,vgg11,147,23\n")
	f.Add(tiresiasHeader + "\n0,1,0,606,vgg19,164,30\n0,1,0,606,vgg19,164,30\n")
	f.Add(tiresiasHeader + "\n\"a,b\",1,1e3,0,\"\",0,0\n")
	f.Add("a,b\n1,2\n")
	f.Fuzz(func(t *testing.T, src string) {
		tr, err := Parse(strings.NewReader(src), "fuzz.csv")
		if err != nil {
			if tr != nil {
				t.Fatal("trace and error")
			}
			if !strings.Contains(err.Error(), "fuzz.csv") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		checkInvariants(t, tr)
	})
}
