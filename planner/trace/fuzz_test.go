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
	f.Add("job_id,num_gpu,submit_time,iterations,model_name,batch_size,duration,interval,iteration_time,resource_time_0,resource_time_1,resource_time_2,priority\n" +
		"0,1,0,5853661,dqn,128,2868294000,46122000,490,446,8,0,1\n1,8,201694000,8787693,dqn,128,4472936000,201694000,509,435,8,0.5,0\n")
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
